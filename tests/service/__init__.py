"""The service over HTTP: real Solr, the recording LLM server, the model server."""
