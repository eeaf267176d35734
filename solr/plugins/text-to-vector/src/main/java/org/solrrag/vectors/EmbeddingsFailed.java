package org.solrrag.vectors;

import org.apache.solr.common.SolrException;

/**
 * What a request is answered when the embeddings endpoint fails: HTTP 502 (Bad Gateway), the
 * fault of the API Solr calls, not of Solr. A 503 would tell Solr's clients that this node is
 * unavailable, and they would take it out of rotation while every node fails alike.
 */
public final class EmbeddingsFailed extends SolrException {
  static final int BAD_GATEWAY = 502;

  public EmbeddingsFailed(String message, Throwable cause) {
    super(BAD_GATEWAY, message, cause);
  }
}
