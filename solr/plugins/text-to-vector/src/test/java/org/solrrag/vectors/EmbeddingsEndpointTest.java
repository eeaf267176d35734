package org.solrrag.vectors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ServerSocket;
import java.util.List;
import org.apache.solr.common.util.NamedList;
import org.junit.jupiter.api.Test;

/** Against the live endpoint named by -Dembeddings.endpoint (the local model server). */
class EmbeddingsEndpointTest {
  static final String MODEL = "all-MiniLM-L6-v2";

  static String endpoint() {
    String url = System.getProperty("embeddings.endpoint", "");
    if (url.isBlank() || url.startsWith("$")) {
      throw new IllegalStateException("run with -Dembeddings.endpoint=http://.../v1/");
    }
    return url;
  }

  static NamedList<Object> args(Object... pairs) {
    NamedList<Object> args = new NamedList<>();
    for (int i = 0; i < pairs.length; i += 2) {
      args.add((String) pairs[i], pairs[i + 1]);
    }
    return args;
  }

  static String deadEndpoint() throws Exception {
    try (ServerSocket socket = new ServerSocket(0)) {
      return "http://127.0.0.1:" + socket.getLocalPort() + "/v1/";
    }
  }

  @Test
  void oneVectorPerTextInOrderWhateverTheBatchSize() throws Exception {
    List<String> texts = List.of("The keeper lit the lamp.", "Apple trees are pruned.", "Fog.");
    EmbeddingsEndpoint whole = EmbeddingsEndpoint.fromArgs(args("endpoint", endpoint(), "model", MODEL));
    EmbeddingsEndpoint byTwo =
        EmbeddingsEndpoint.fromArgs(args("endpoint", endpoint(), "model", MODEL, "batchSize", "2"));
    List<float[]> vectors = whole.embed(texts);
    assertEquals(3, vectors.size());
    for (float[] vector : vectors) {
      assertEquals(384, vector.length);
    }
    List<float[]> batched = byTwo.embed(texts);
    for (int i = 0; i < texts.size(); i++) {
      assertArrayEquals(vectors.get(i), batched.get(i), 1e-5f);
    }
  }

  @Test
  void anUnreachableEndpointSaysWhereNeverTheToken() throws Exception {
    EmbeddingsEndpoint dead = new EmbeddingsEndpoint(deadEndpoint(), MODEL, "sk-secret-token", 5, 64);
    EmbeddingsException error = assertThrows(EmbeddingsException.class, () -> dead.embed(List.of("x")));
    assertTrue(error.getMessage().contains("cannot be reached"), error.getMessage());
    assertFalse(error.getMessage().contains("sk-secret-token"));
  }

  @Test
  void anUnknownModelIsTheEndpointsErrorNamed() throws Exception {
    EmbeddingsEndpoint wrong = new EmbeddingsEndpoint(endpoint(), "no-such-model", "", 30, 64);
    EmbeddingsException error = assertThrows(EmbeddingsException.class, () -> wrong.embed(List.of("x")));
    assertTrue(error.getMessage().contains("answered HTTP 4"), error.getMessage());
  }

  @Test
  void anAnswerThatIsNotOneFiniteVectorPerTextIsRefused() {
    String[] answers = {
      "not json",
      "{\"data\": []}",
      "{\"data\": [{\"index\": 0, \"embedding\": [0.1, 0.2]}]}",
      "{\"data\": [{\"index\": 0, \"embedding\": [0.1]}, {\"index\": 1, \"embedding\": [0.1, 0.2]}]}",
      "{\"data\": [{\"index\": 5, \"embedding\": [0.1]}, {\"index\": 1, \"embedding\": [0.1]}]}",
      "{\"data\": [{\"index\": 0, \"embedding\": [1e99]}, {\"index\": 1, \"embedding\": [0.1]}]}",
      "{\"data\": [{\"index\": 0, \"embedding\": []}, {\"index\": 1, \"embedding\": []}]}",
    };
    for (String answer : answers) {
      assertThrows(EmbeddingsException.class, () -> EmbeddingsEndpoint.vectorsOf(answer, 2), answer);
    }
  }

  @Test
  void absurdSettingsAreRefusedWithTheirName() {
    String[][] cases = {
      {"endpoint", "ftp://x/"}, {"batchSize", "0"}, {"batchSize", "100000"}, {"timeoutSeconds", "0"},
      {"timeoutSeconds", "soon"},
    };
    for (String[] bad : cases) {
      NamedList<Object> args = args("endpoint", "http://127.0.0.1:1/v1/", "model", MODEL);
      args.remove(bad[0]);
      args.add(bad[0], bad[1]);
      IllegalArgumentException error =
          assertThrows(IllegalArgumentException.class, () -> EmbeddingsEndpoint.fromArgs(args));
      assertTrue(error.getMessage().contains(bad[0]), error.getMessage());
    }
  }
}
