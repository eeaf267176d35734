# Stand-in for python:3.11-slim (testing/docker/bases.sh): Debian bookworm's Python 3.11.
FROM solr-rag-ci/debian:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && ln -s /usr/bin/python3 /usr/local/bin/python
CMD ["python3"]
