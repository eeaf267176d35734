"""What the tests and the benchmarks share: servers on real sockets (the recording LLM, any ASGI
app in a thread), the test corpus, a recording Solr proxy. Never imported by the service."""
