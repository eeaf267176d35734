import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.FloatVectorValues;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.search.DocIdSetIterator;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.KnnFloatVectorQuery;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermInSetQuery;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.BytesRef;
import org.apache.lucene.util.VectorUtil;

/**
 * Where a kNN index loses its questions' nearest neighbours (issue 82), read with Lucene alone
 * from a stopped Solr core's index: recall@10 of the HNSW search against exact search, apart
 * for the neighbours that are the hidden SQuAD/FAQ passages (ids needle-*) and the others, and
 * the error of the scores the index gives the exact top 20 (a filtered search over those 20
 * alone is exact: with quantized vectors, the integers' cosine) against the floats' cosine.
 * Run by bench/quantized_probe.py; java [classpath: Solr's Lucene jars] QuantizedProbe.java
 * INDEX_DIR QUERIES.f32 COUNT DEPTH.
 */
public class QuantizedProbe {
  static final String FIELD = "vector_384";
  static final int DIMENSION = 384;

  public static void main(String[] args) throws Exception {
    Path index = Path.of(args[0]);
    int count = Integer.parseInt(args[2]);
    int depth = Integer.parseInt(args[3]);
    float[][] queries = new float[count][DIMENSION];
    try (FileChannel file = FileChannel.open(Path.of(args[1]))) {
      FloatBuffer floats = file.map(FileChannel.MapMode.READ_ONLY, 0, (long) count * DIMENSION * 4)
          .order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
      for (float[] query : queries) {
        floats.get(query);
      }
    }
    try (FSDirectory directory = FSDirectory.open(index);
        DirectoryReader reader = DirectoryReader.open(directory)) {
      IndexSearcher searcher = new IndexSearcher(reader);
      List<float[]> vectors = new ArrayList<>();
      List<Integer> docs = new ArrayList<>();
      for (LeafReaderContext leaf : reader.leaves()) {
        FloatVectorValues values = leaf.reader().getFloatVectorValues(FIELD);
        for (int doc = values.nextDoc(); doc != DocIdSetIterator.NO_MORE_DOCS;
            doc = values.nextDoc()) {
          vectors.add(values.vectorValue().clone());
          docs.add(leaf.docBase + doc);
        }
      }
      int[] found = new int[2];  // needles, others
      int[] exactCount = new int[2];
      double[] error = new double[2];
      double[] absolute = new double[2];
      int[] scored = new int[2];
      for (float[] query : queries) {
        float[] cosine = new float[vectors.size()];
        for (int i = 0; i < cosine.length; i++) {
          cosine[i] = VectorUtil.cosine(vectors.get(i), query);
        }
        java.util.PriorityQueue<Integer> top =
            new java.util.PriorityQueue<>((x, y) -> Float.compare(cosine[x], cosine[y]));
        for (int i = 0; i < cosine.length; i++) {
          top.add(i);
          if (top.size() > 20) {
            top.poll();
          }
        }
        List<Integer> twenty = new ArrayList<>(top);
        twenty.sort((x, y) -> Float.compare(cosine[y], cosine[x]));
        Map<Integer, Integer> kind = new HashMap<>();
        Map<String, Float> exactCosine = new HashMap<>();
        List<BytesRef> ids = new ArrayList<>();
        for (int rank = 0; rank < twenty.size(); rank++) {
          int doc = docs.get(twenty.get(rank));
          String id = searcher.storedFields().document(doc).get("id");
          ids.add(new BytesRef(id));
          exactCosine.put(id, cosine[twenty.get(rank)]);
          if (rank < 10) {
            kind.put(doc, id.startsWith("needle") ? 0 : 1);
            exactCount[id.startsWith("needle") ? 0 : 1]++;
          }
        }
        for (ScoreDoc hit : searcher.search(new KnnFloatVectorQuery(FIELD, query, depth), 10)
            .scoreDocs) {
          Integer which = kind.get(hit.doc);
          if (which != null) {
            found[which]++;
          }
        }
        TermInSetQuery only = new TermInSetQuery("id", ids);
        for (ScoreDoc hit : searcher.search(new KnnFloatVectorQuery(FIELD, query, 20, only), 20)
            .scoreDocs) {
          String id = searcher.storedFields().document(hit.doc).get("id");
          int which = id.startsWith("needle") ? 0 : 1;
          double off = (2 * hit.score - 1) - exactCosine.get(id);  // COSINE's score: (1 + cos) / 2
          error[which] += off;
          absolute[which] += Math.abs(off);
          scored[which]++;
        }
      }
      System.out.printf("{\"segments\": %d, \"vectors\": %d, \"depth\": %d, \"questions\": %d,%n",
          reader.leaves().size(), vectors.size(), depth, count);
      System.out.printf(" \"recall\": %.3f, \"needles_found\": [%d, %d], \"others_found\": [%d, %d],%n",
          (found[0] + found[1]) / (10.0 * count), found[0], exactCount[0], found[1], exactCount[1]);
      System.out.printf(" \"score_error\": {\"needles\": [%.4f, %.4f], \"others\": [%.4f, %.4f]}}%n",
          error[0] / scored[0], absolute[0] / scored[0], error[1] / scored[1],
          absolute[1] / scored[1]);
    }
  }
}
