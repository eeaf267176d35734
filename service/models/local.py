"""The models the service serves itself (`solr-rag serve --with-model-server`): the quoting
model of the model server, and the packaged GGUF answerers llama.cpp runs. Both answer to any
model name a request sends, so the service, not they, says which names are served."""

from service.models.packaged import MODELS

EXTRACTIVE_MODEL = "extractive"
LOCAL_MODELS = frozenset({*MODELS, EXTRACTIVE_MODEL})
