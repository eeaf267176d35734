package org.solrrag.vectors;

import org.apache.lucene.codecs.Codec;
import org.apache.lucene.codecs.FilterCodec;
import org.apache.lucene.codecs.KnnVectorsFormat;
import org.apache.lucene.codecs.perfield.PerFieldKnnVectorsFormat;
import org.apache.solr.common.SolrException;
import org.apache.solr.core.SchemaCodecFactory;
import org.apache.solr.core.SolrCore;
import org.apache.solr.schema.SchemaField;

/**
 * Solr's SchemaCodecFactory (per-field postings, doc values and vectors formats as the schema
 * says), except that a field of {@link ScalarQuantizedDenseVectorField} gets that type's
 * quantized vectors format. In solrconfig.xml:
 *
 * <pre>{@code <codecFactory class="org.solrrag.vectors.QuantizedVectorsCodecFactory"/>}</pre>
 *
 * <p>The codec keeps the name of Solr's own (Lucene99 on Solr 9.8, Lucene912 on 9.10), and each
 * field's vectors format is written under Lucene's own name for it: a segment written with this
 * factory is read back by Lucene's own codecs (a restart reads it so), not by this class.
 */
public class QuantizedVectorsCodecFactory extends SchemaCodecFactory {
  private volatile SolrCore core;
  private Codec codec;

  @Override
  public void inform(SolrCore core) {
    super.inform(core);
    this.core = core;
    Codec solrs = super.getCodec();
    if (!(solrs.knnVectorsFormat() instanceof PerFieldKnnVectorsFormat perField)) {
      throw new SolrException(SolrException.ErrorCode.SERVER_ERROR,
          "QuantizedVectorsCodecFactory: Solr's codec " + solrs.getName()
              + " has no per-field vectors format to extend");
    }
    KnnVectorsFormat vectors = new PerFieldKnnVectorsFormat() {
      @Override
      public KnnVectorsFormat getKnnVectorsFormatForField(String field) {
        SchemaField schemaField = QuantizedVectorsCodecFactory.this.core.getLatestSchema()
            .getFieldOrNull(field);
        if (schemaField != null
            && schemaField.getType() instanceof ScalarQuantizedDenseVectorField quantized) {
          return quantized.knnVectorsFormat();
        }
        return perField.getKnnVectorsFormatForField(field);
      }
    };
    codec = new FilterCodec(solrs.getName(), solrs) {
      @Override
      public KnnVectorsFormat knnVectorsFormat() {
        return vectors;
      }
    };
  }

  @Override
  public Codec getCodec() {
    if (codec == null) {
      throw new IllegalStateException("QuantizedVectorsCodecFactory: inform() must come first");
    }
    return codec;
  }
}
