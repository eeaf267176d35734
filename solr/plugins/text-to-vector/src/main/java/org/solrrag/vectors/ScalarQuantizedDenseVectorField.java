package org.solrrag.vectors;

import java.io.IOException;
import java.util.Map;
import org.apache.lucene.codecs.KnnVectorsFormat;
import org.apache.lucene.codecs.KnnVectorsReader;
import org.apache.lucene.codecs.KnnVectorsWriter;
import org.apache.lucene.codecs.lucene99.Lucene99HnswScalarQuantizedVectorsFormat;
import org.apache.lucene.index.SegmentReadState;
import org.apache.lucene.index.SegmentWriteState;
import org.apache.lucene.index.VectorEncoding;
import org.apache.solr.common.SolrException;
import org.apache.solr.schema.DenseVectorField;
import org.apache.solr.schema.IndexSchema;

/**
 * A dense vector field whose HNSW graph is searched over scalar-quantized vectors: Lucene's own
 * {@code Lucene99HnswScalarQuantizedVectorsFormat}, which Solr 9.8.1 (Lucene 9.11) and 9.10.1
 * (Lucene 9.12) carry but do not expose in a schema: {@code solr.ScalarQuantizedDenseVectorField}
 * comes after 9.10.1 (Solr 10.0), with these parameters, so a schema moves to it by its class
 * name.
 *
 * <p>Each float is kept as a 7-bit (or 4-bit) integer beside the float vector: a search reads
 * the quantized vectors (a quarter of the floats' bytes at 7 bits, an eighth at 4 bits
 * compressed), the floats are read only to merge segments and for stored values and functions.
 * Disk grows by the quantized copy; the memory a search needs to stay fast shrinks.
 *
 * <p>Parameters, beyond DenseVectorField's ({@code vectorDimension}, {@code similarityFunction},
 * {@code hnswMaxConnections}, {@code hnswBeamWidth}; {@code vectorEncoding} must stay FLOAT32):
 *
 * <ul>
 *   <li>{@code bits}: 7 (default) or 4;
 *   <li>{@code confidenceInterval}: the share of values, 0.9 to 1.0, whose range the integers
 *       span (outliers are clipped); unset: 1 - 1/(dimension + 1), Lucene's default;
 *   <li>{@code dynamicConfidenceInterval}: true: the interval is found anew from the values at
 *       each merge (instead of {@code confidenceInterval});
 *   <li>{@code compress}: with 4 bits, two values a byte (half the memory again).
 * </ul>
 *
 * An empty value is the default (so a configset can pass a collection property through).
 * The vectors format is used when the core's codec factory is {@link QuantizedVectorsCodecFactory}.
 */
public class ScalarQuantizedDenseVectorField extends DenseVectorField {
  static final String BITS = "bits";
  static final String CONFIDENCE_INTERVAL = "confidenceInterval";
  static final String DYNAMIC_CONFIDENCE_INTERVAL = "dynamicConfidenceInterval";
  static final String COMPRESS = "compress";

  private Quantization quantization;
  private KnnVectorsFormat format;

  @Override
  public void init(IndexSchema schema, Map<String, String> args) {
    String bits = take(args, BITS);
    String interval = take(args, CONFIDENCE_INTERVAL);
    String dynamic = take(args, DYNAMIC_CONFIDENCE_INTERVAL);
    String compress = take(args, COMPRESS);
    super.init(schema, args);
    String name = "field type " + getTypeName() + " (" + getClass().getSimpleName() + "): ";
    try {
      quantization = Quantization.of(bits, interval, dynamic, compress);
    } catch (IllegalArgumentException e) {
      throw refused(name + e.getMessage());
    }
    if (getVectorEncoding() != VectorEncoding.FLOAT32) {
      throw refused(name + "quantizes float vectors: vectorEncoding must be FLOAT32, not "
          + getVectorEncoding());
    }
    if (!HNSW_ALGORITHM.equals(getKnnAlgorithm())) {
      throw refused(name + "knnAlgorithm must be hnsw, not " + getKnnAlgorithm());
    }
    format = new Dimensioned(
        new Lucene99HnswScalarQuantizedVectorsFormat(getHnswMaxConn(), getHnswBeamWidth(), 1,
            quantization.bits(), quantization.compress(), quantization.confidenceInterval(), null),
        getDimension());
  }

  /** The vectors format of this type's fields (one per field type, built at schema load). */
  public KnnVectorsFormat knnVectorsFormat() {
    return format;
  }

  public Quantization getQuantization() {
    return quantization;
  }

  /**
   * The quantization's parameters, read from the schema's text (null or blank: the default).
   *
   * @param bits 7 or 4
   * @param confidenceInterval null: Lucene's default (1 - 1/(dimension + 1)); 0: dynamic (found
   *     from the values at each merge); else 0.9 to 1.0
   * @param compress two 4-bit values a byte
   */
  public record Quantization(int bits, Float confidenceInterval, boolean compress) {
    static Quantization of(String bits, String interval, String dynamic, String compress) {
      int parsedBits = 7;
      if (present(bits)) {
        if (!bits.strip().equals("4") && !bits.strip().equals("7")) {
          throw new IllegalArgumentException("bits must be 4 or 7, not '" + bits + "'");
        }
        parsedBits = Integer.parseInt(bits.strip());
      }
      Float confidence = null;
      if (present(interval)) {
        try {
          confidence = Float.parseFloat(interval.strip());
        } catch (NumberFormatException e) {
          confidence = Float.NaN;
        }
        if (!(confidence >= 0.9f && confidence <= 1.0f)) {
          throw new IllegalArgumentException(
              "confidenceInterval must be a number from 0.9 to 1.0, not '" + interval + "'");
        }
      }
      if (flag(DYNAMIC_CONFIDENCE_INTERVAL, dynamic)) {
        if (confidence != null) {
          throw new IllegalArgumentException(
              "confidenceInterval and dynamicConfidenceInterval=true exclude each other");
        }
        confidence = 0f; // Lucene's "dynamic"
      }
      boolean packed = flag(COMPRESS, compress);
      if (packed && parsedBits != 4) {
        throw new IllegalArgumentException(
            "compress packs two 4-bit values a byte: it needs bits=4, not " + parsedBits);
      }
      return new Quantization(parsedBits, confidence, packed);
    }

    private static boolean present(String value) {
      return value != null && !value.isBlank();
    }

    private static boolean flag(String key, String value) {
      if (!present(value) || value.strip().equals("false")) {
        return false;
      }
      if (value.strip().equals("true")) {
        return true;
      }
      throw new IllegalArgumentException(key + " must be true or false, not '" + value + "'");
    }
  }

  /** The argument removed from args (FieldType refuses the ones left), as written. */
  private static String take(Map<String, String> args, String key) {
    return args.remove(key);
  }

  private static SolrException refused(String message) {
    return new SolrException(SolrException.ErrorCode.SERVER_ERROR, message);
  }

  /**
   * Lucene's format under its own name (the index names it, and Lucene reads it back by that
   * name without this plugin's help), with this field's dimension as its limit: Lucene's own
   * stops at 1024, and Solr lets a schema go beyond (vector_1536), as its SchemaCodecFactory does.
   */
  static final class Dimensioned extends KnnVectorsFormat {
    private final KnnVectorsFormat delegate;
    private final int maxDimensions;

    Dimensioned(KnnVectorsFormat delegate, int dimension) {
      super(delegate.getName());
      this.delegate = delegate;
      this.maxDimensions = Math.max(dimension, delegate.getMaxDimensions(""));
    }

    @Override
    public KnnVectorsWriter fieldsWriter(SegmentWriteState state) throws IOException {
      return delegate.fieldsWriter(state);
    }

    @Override
    public KnnVectorsReader fieldsReader(SegmentReadState state) throws IOException {
      return delegate.fieldsReader(state);
    }

    @Override
    public int getMaxDimensions(String fieldName) {
      return maxDimensions;
    }

    @Override
    public String toString() {
      return delegate.toString();
    }
  }
}
