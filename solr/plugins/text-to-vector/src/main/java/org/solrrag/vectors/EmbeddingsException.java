package org.solrrag.vectors;

/** The embeddings endpoint could not give one vector per text; the message says why (never the
 * token). */
public class EmbeddingsException extends Exception {
  public EmbeddingsException(String message) {
    super(message);
  }
}
