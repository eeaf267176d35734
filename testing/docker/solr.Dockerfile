# Stand-in for solr:9.8.1 (testing/docker/bases.sh): Solr from the jars solr/local/pom.xml
# fetches from Maven Central (build argument SOLR_VERSION: 9.8.1, or 9.10.1), run as the image
# runs it: `solr-foreground [-c]` as user solr (8983), SOLR_HOME /var/solr/data (its lib/ loaded
# for every core), `solr zk ...` for the configsets, curl for health checks. Built with the
# repository as its context.
FROM solr-rag-ci/maven:3 AS jars
ARG SOLR_VERSION=9.8.1
WORKDIR /build
COPY solr/local/pom.xml ./
RUN mvn -q -B -Dsolr.version=${SOLR_VERSION} -Dsolr.lib=/opt/solr/lib dependency:copy-dependencies
COPY testing/docker/solr/SolrForeground.java ./
RUN javac -d /opt/solr/classes -cp '/opt/solr/lib/*' SolrForeground.java

FROM solr-rag-ci/debian:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      openjdk-17-jre-headless curl socat \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY --from=jars /opt/solr /opt/solr
COPY testing/docker/solr/solr-foreground testing/docker/solr/solr /opt/solr/bin/
COPY testing/docker/solr/log4j2.xml /opt/solr/server/resources/log4j2.xml
# the embedded ZooKeeper's configuration, where Solr looks for it (the distribution's); the
# modules SOLR_MODULES may name, as folders Solr finds (their jars are on the class path)
RUN mkdir -p /opt/solr/server/solr /opt/solr/modules/llm/lib /opt/solr/modules/langid/lib \
 && printf 'tickTime=2000\ninitLimit=10\nsyncLimit=5\n' > /opt/solr/server/solr/zoo.cfg \
 && chmod +x /opt/solr/bin/* \
 && useradd --uid 8983 --user-group --home-dir /var/solr solr \
 && mkdir -p /var/solr/data /var/solr/logs && chown -R solr:solr /var/solr
ENV PATH=/opt/solr/bin:$PATH SOLR_HOME=/var/solr/data SOLR_INSTALL_DIR=/opt/solr
USER solr
WORKDIR /opt/solr
EXPOSE 8983
CMD ["solr-foreground"]
