# The RAG service and the local model server (same image, different commands).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip install --no-cache-dir .
COPY prompts ./prompts
COPY rag.properties ./rag.properties
ENV PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["solr-rag", "serve", "--host", "0.0.0.0", "--port", "8000", "--config", "/app/rag.properties"]
