package org.solrrag.vectors;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.solr.common.util.NamedList;
import org.apache.solr.common.util.Utils;
import org.noggit.ObjectBuilder;

/**
 * An OpenAI-compatible {@code /v1/embeddings} endpoint: texts in, one vector per text out, in
 * requests of at most {@code batchSize} texts.
 *
 * <p>Configured from a plugin's arguments in solrconfig.xml: {@code endpoint} (the base URL, up to
 * {@code /v1/}), {@code model}, and optionally {@code tokenEnv} (the name of the environment
 * variable holding the API token: the token itself is never in a file, a message or a log),
 * {@code timeoutSeconds} (30) and {@code batchSize} (64).
 */
public final class EmbeddingsEndpoint {
  static final int DEFAULT_BATCH = 64;
  static final int MAX_BATCH = 2048;
  static final int DEFAULT_TIMEOUT_SECONDS = 30;
  private static final int MAX_ERROR_CHARS = 300;

  private final URI uri;
  private final String model;
  private final String token;
  private final Duration timeout;
  private final int batchSize;
  private final HttpClient http;

  EmbeddingsEndpoint(String endpoint, String model, String token, int timeoutSeconds, int batchSize) {
    if (endpoint == null || !(endpoint.startsWith("http://") || endpoint.startsWith("https://"))) {
      throw new IllegalArgumentException("endpoint must be an http(s):// URL, not " + endpoint);
    }
    if (model == null || model.isBlank()) {
      throw new IllegalArgumentException("model must name the embeddings model");
    }
    if (timeoutSeconds < 1 || timeoutSeconds > 600) {
      throw new IllegalArgumentException("timeoutSeconds must be 1 to 600, not " + timeoutSeconds);
    }
    if (batchSize < 1 || batchSize > MAX_BATCH) {
      throw new IllegalArgumentException(
          "batchSize must be 1 to " + MAX_BATCH + ", not " + batchSize);
    }
    this.uri = URI.create(endpoint.endsWith("/") ? endpoint + "embeddings" : endpoint + "/embeddings");
    this.model = model;
    this.token = token == null ? "" : token;
    this.timeout = Duration.ofSeconds(timeoutSeconds);
    this.batchSize = batchSize;
    // HTTP/1.1: an http:// endpoint would otherwise be asked to upgrade to h2c on every call
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(this.timeout)
            .build();
  }

  /** The endpoint a plugin's arguments describe; IllegalArgumentException names what is wrong. */
  public static EmbeddingsEndpoint fromArgs(NamedList<?> args) {
    String tokenEnv = string(args, "tokenEnv", "");
    String token = tokenEnv.isEmpty() ? "" : System.getenv().getOrDefault(tokenEnv, "");
    return new EmbeddingsEndpoint(
        string(args, "endpoint", null),
        string(args, "model", null),
        token,
        number(args, "timeoutSeconds", DEFAULT_TIMEOUT_SECONDS),
        number(args, "batchSize", DEFAULT_BATCH));
  }

  public String model() {
    return model;
  }

  /** Where the endpoint is (for messages: the URL, never the token). */
  public String address() {
    return uri.toString();
  }

  /** One vector per text, in order; EmbeddingsException says what went wrong. */
  public List<float[]> embed(List<String> texts) throws EmbeddingsException {
    List<float[]> vectors = new ArrayList<>(texts.size());
    for (int start = 0; start < texts.size(); start += batchSize) {
      vectors.addAll(embedBatch(texts.subList(start, Math.min(start + batchSize, texts.size()))));
    }
    return vectors;
  }

  private List<float[]> embedBatch(List<String> texts) throws EmbeddingsException {
    Map<String, Object> payload = new LinkedHashMap<>();
    payload.put("model", model);
    payload.put("input", texts);
    payload.put("encoding_format", "float");
    HttpRequest.Builder request =
        HttpRequest.newBuilder(uri)
            .timeout(timeout)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(Utils.toJSONString(payload)));
    if (!token.isEmpty()) {
      request.header("Authorization", "Bearer " + token);
    }
    HttpResponse<String> response;
    try {
      response = http.send(request.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new EmbeddingsException(
          "the embeddings endpoint " + address() + " cannot be reached (" + e.getClass().getSimpleName() + ")");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new EmbeddingsException("interrupted while calling the embeddings endpoint " + address());
    }
    if (response.statusCode() != 200) {
      String body = response.body();
      throw new EmbeddingsException(
          "the embeddings endpoint " + address() + " answered HTTP " + response.statusCode() + ": "
              + body.substring(0, Math.min(body.length(), MAX_ERROR_CHARS)));
    }
    return vectorsOf(response.body(), texts.size());
  }

  /** The vectors of an answer, in input order; anything else than one finite vector per text,
   * all of one dimension, is an error. */
  static List<float[]> vectorsOf(String body, int expected) throws EmbeddingsException {
    List<float[]> vectors = new ArrayList<>(Collections.nCopies(expected, (float[]) null));
    try {
      Object data = ((Map<?, ?>) ObjectBuilder.fromJSON(body)).get("data");
      for (Object item : (List<?>) data) {
        Map<?, ?> entry = (Map<?, ?>) item;
        int index = ((Number) entry.get("index")).intValue();
        List<?> values = (List<?>) entry.get("embedding");
        float[] vector = new float[values.size()];
        for (int i = 0; i < vector.length; i++) {
          vector[i] = ((Number) values.get(i)).floatValue();
          if (!Float.isFinite(vector[i])) {
            throw new EmbeddingsException("the embeddings endpoint returned a value that is not a finite number");
          }
        }
        vectors.set(index, vector);
      }
    } catch (IOException | RuntimeException e) {
      throw new EmbeddingsException("the embeddings endpoint's answer is not data[].embedding JSON (" + e + ")");
    }
    int dimension = -1;
    for (float[] vector : vectors) {
      if (vector == null || vector.length == 0) {
        throw new EmbeddingsException("the embeddings endpoint returned fewer vectors than texts (" + expected + ")");
      }
      if (dimension >= 0 && vector.length != dimension) {
        throw new EmbeddingsException("the embeddings endpoint returned vectors of different dimensions");
      }
      dimension = vector.length;
    }
    return vectors;
  }

  private static String string(NamedList<?> args, String name, String fallback) {
    Object value = args.get(name);
    return value == null ? fallback : value.toString().trim();
  }

  /** A whole-number argument, or `fallback`; IllegalArgumentException names it. */
  static int number(NamedList<?> args, String name, int fallback) {
    Object value = args.get(name);
    if (value == null) {
      return fallback;
    }
    try {
      return Integer.parseInt(value.toString().trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + " must be a whole number, not " + value);
    }
  }
}
