package org.solrrag.vectors;

import java.util.List;
import org.apache.lucene.search.Query;
import org.apache.solr.common.SolrException;
import org.apache.solr.common.params.ModifiableSolrParams;
import org.apache.solr.common.params.SolrParams;
import org.apache.solr.common.util.NamedList;
import org.apache.solr.request.SolrQueryRequest;
import org.apache.solr.search.QParser;
import org.apache.solr.search.QParserPlugin;
import org.apache.solr.search.QueryParsing;
import org.apache.solr.search.SyntaxError;
import org.apache.solr.search.neural.KnnQParser;

/**
 * {@code {!text_to_vector_knn f=vector_384 topK=10}free text}: the text embedded by the
 * configured endpoint ({@link EmbeddingsEndpoint}'s arguments), then Solr's own kNN on that
 * vector with its local parameters: in {@code q}, pre-filtered by the request's {@code fq}s; as
 * an {@code fq}, the topK nearest of all.
 */
public class TextToVectorKnnQParserPlugin extends QParserPlugin {
  private EmbeddingsEndpoint endpoint;

  @Override
  public void init(NamedList<?> args) {
    try {
      endpoint = EmbeddingsEndpoint.fromArgs(args);
    } catch (IllegalArgumentException e) {
      throw new SolrException(
          SolrException.ErrorCode.SERVER_ERROR, "TextToVectorKnnQParserPlugin: " + e.getMessage());
    }
  }

  @Override
  public QParser createParser(
      String qstr, SolrParams localParams, SolrParams params, SolrQueryRequest req) {
    return new QParser(qstr, localParams, params, req) {
      @Override
      public Query parse() throws SyntaxError {
        String text = qstr == null ? "" : qstr.trim();
        if (text.isEmpty()) {
          throw new SyntaxError("text_to_vector_knn needs text to search for");
        }
        float[] vector;
        try {
          vector = endpoint.embed(List.of(text)).get(0);
        } catch (EmbeddingsException e) {
          throw new EmbeddingsFailed("text-to-vector: " + e.getMessage(), e);
        }
        // Solr's kNN reads its vector from the local parameter `v` (the text, here)
        ModifiableSolrParams knn = new ModifiableSolrParams(localParams);
        String vectorText = vectorText(vector);
        knn.set(QueryParsing.V, vectorText);
        KnnQParser parser = new KnnQParser(vectorText, knn, params, req);
        // as an fq, Solr's kNN must know it is one: otherwise it pre-filters with every fq,
        // itself included, and parses itself again without end
        parser.setIsFilter(isFilter());
        return parser.parse();
      }
    };
  }

  /** Solr's kNN syntax for a vector: [0.1, -0.2, ...]. */
  static String vectorText(float[] vector) {
    StringBuilder text = new StringBuilder("[");
    for (int i = 0; i < vector.length; i++) {
      text.append(i == 0 ? "" : ",").append(vector[i]);
    }
    return text.append(']').toString();
  }
}
