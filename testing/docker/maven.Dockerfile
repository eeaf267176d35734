# Stand-in for maven:3.9-eclipse-temurin-17 (testing/docker/bases.sh): Debian's Maven and
# OpenJDK 17.
FROM solr-rag-ci/debian:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      maven openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
CMD ["mvn", "--version"]
