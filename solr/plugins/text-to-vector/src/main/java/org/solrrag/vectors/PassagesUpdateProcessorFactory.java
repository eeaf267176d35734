package org.solrrag.vectors;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.solr.common.SolrException;
import org.apache.solr.common.SolrInputDocument;
import org.apache.solr.common.util.NamedList;
import org.apache.solr.common.util.Utils;
import org.apache.solr.core.CoreContainer;
import org.apache.solr.request.SolrQueryRequest;
import org.apache.solr.response.SolrQueryResponse;
import org.apache.solr.update.AddUpdateCommand;
import org.apache.solr.update.CommitUpdateCommand;
import org.apache.solr.update.DeleteUpdateCommand;
import org.apache.solr.update.processor.UpdateRequestProcessor;
import org.apache.solr.update.processor.UpdateRequestProcessorFactory;

/**
 * The passages collection follows this (documents) collection, whoever writes it: Datafari's
 * VectorUpdateProcessor's chunking step. Each document added is cut into passages as the
 * service cuts them ({@link PassageSplitter}: {@code size}, {@code overlap}), which replace the
 * document's passages in {@code collection} ({@code <id>_<n>}, their {@code parentField} the
 * document's id, {@code indexField} their rank, {@code textField}'s text in {@code
 * passageTextField}, and the document's {@code copyField}s); that collection's own chain embeds
 * them (our text-to-vector processor). A document deleted by id takes its passages with it; a
 * commit here commits the passages too. A delete by query is not followed: {@code solr-rag
 * sync} removes passages whose document is gone. A document's text is cut after {@code
 * maxChars} characters (default 5,000,000, the service's ingestion cap).
 *
 * <p>Passages are sent when the update request ends (or a delete or commit comes, or {@code
 * maxPending} documents are held), after the documents went on, to {@code solrUrl} (default:
 * this node). If that fails, the update fails with the reason. Place it before
 * DistributedUpdateProcessorFactory: the node receiving the update does it, once.
 */
public class PassagesUpdateProcessorFactory extends UpdateRequestProcessorFactory {
  static final List<String> COPIED =
      List.of(
          "title", "url", "language", "last_modified", "allowed_groups", "denied_groups",
          "allow_token_document", "allow_token_parent", "allow_token_share",
          "deny_token_document", "deny_token_parent", "deny_token_share");

  private String collection;
  private String idField;
  private String textField;
  private String parentField;
  private String indexField;
  private String passageTextField;
  private List<String> copied;
  private PassageSplitter splitter;
  private int maxChars;
  private String solrUrl;
  private int maxPending;
  private Duration timeout;
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @Override
  public void init(NamedList<?> args) {
    try {
      collection = text(args, "collection", "");
      if (!collection.matches("[A-Za-z0-9._][A-Za-z0-9._-]{0,99}")) {
        throw new IllegalArgumentException("collection must name a collection, not '" + collection + "'");
      }
      idField = text(args, "idField", "id");
      textField = text(args, "textField", "content");
      parentField = text(args, "parentField", "parent_id");
      indexField = text(args, "indexField", "chunk_index");
      passageTextField = text(args, "passageTextField", "content");
      copied = new ArrayList<>();
      for (Object field : args.getAll("copyField")) {
        if (field != null && !field.toString().isBlank()) {
          copied.add(field.toString().trim());
        }
      }
      if (copied.isEmpty()) {
        copied = COPIED;
      }
      splitter =
          new PassageSplitter(
              EmbeddingsEndpoint.number(args, "size", 1000),
              EmbeddingsEndpoint.number(args, "overlap", 100));
      // what one document may yield, as the service's ingestion bounds it: a crawler's
      // document of any size costs at most this much splitting and embedding
      maxChars = EmbeddingsEndpoint.number(args, "maxChars", 5_000_000);
      if (maxChars < 1) {
        throw new IllegalArgumentException("maxChars must be at least 1, not " + maxChars);
      }
      solrUrl = text(args, "solrUrl", "").replaceAll("/+$", "");
      maxPending = EmbeddingsEndpoint.number(args, "maxPending", 1000);
      timeout = Duration.ofSeconds(EmbeddingsEndpoint.number(args, "timeoutSeconds", 600));
    } catch (IllegalArgumentException e) {
      throw new SolrException(
          SolrException.ErrorCode.SERVER_ERROR, "PassagesUpdateProcessorFactory: " + e.getMessage());
    }
  }

  private static String text(NamedList<?> args, String name, String fallback) {
    Object value = args.get(name);
    return value == null || value.toString().isBlank() ? fallback : value.toString().trim();
  }

  @Override
  public UpdateRequestProcessor getInstance(
      SolrQueryRequest req, SolrQueryResponse rsp, UpdateRequestProcessor next) {
    return new Processor(next, updateUrl(req));
  }

  /** {@code <solrUrl or this node>/<collection>/update}. */
  private String updateUrl(SolrQueryRequest req) {
    String base = solrUrl;
    if (base.isEmpty()) {
      CoreContainer container = req == null ? null : req.getCore().getCoreContainer();
      if (container == null || !container.isZooKeeperAware()) {
        throw new SolrException(
            SolrException.ErrorCode.SERVER_ERROR,
            "PassagesUpdateProcessorFactory: set solrUrl (outside SolrCloud the node cannot name itself)");
      }
      base = container.getZkController().getBaseUrl();
    }
    return base + "/" + URLEncoder.encode(collection, StandardCharsets.UTF_8) + "/update";
  }

  /** A document's passages, as Solr JSON update commands. */
  List<String> commands(SolrInputDocument document) {
    Object id = document.getFieldValue(idField);
    List<String> commands = new ArrayList<>();
    if (id == null) {
      return commands;
    }
    commands.add(deletePassagesOf(id.toString()));
    List<String> pieces = splitter.split(atMost(joined(document.getFieldValues(textField)), maxChars));
    for (int i = 0; i < pieces.size(); i++) {
      Map<String, Object> passage = new LinkedHashMap<>();
      passage.put("id", id + "_" + i);
      passage.put(parentField, id.toString());
      passage.put(indexField, i);
      passage.put(passageTextField, pieces.get(i));
      for (String field : copied) {
        Collection<Object> values = document.getFieldValues(field);
        if (values != null && !values.isEmpty()) {
          List<Object> plain = new ArrayList<>();
          for (Object value : values) {
            plain.add(value instanceof Date date ? date.toInstant().toString() : value);
          }
          passage.put(field, plain.size() == 1 ? plain.get(0) : plain);
        }
      }
      commands.add("\"add\":" + Utils.toJSONString(Map.of("doc", passage)));
    }
    return commands;
  }

  String deletePassagesOf(String id) {
    return "\"delete\":" + Utils.toJSONString(Map.of("query", "{!term f=" + parentField + "}" + id));
  }

  /** The text's first {@code max} characters (never half a surrogate pair). */
  static String atMost(String text, int max) {
    if (text.length() <= max) {
      return text;
    }
    int end = Character.isHighSurrogate(text.charAt(max - 1)) ? max - 1 : max;
    return text.substring(0, end);
  }

  /** Multi-valued text joined by line breaks, as the service reads it. */
  private static String joined(Collection<Object> values) {
    if (values == null) {
      return "";
    }
    List<String> texts = new ArrayList<>();
    for (Object value : values) {
      if (value != null && !(value instanceof SolrInputDocument)) {
        texts.add(value.toString());
      }
    }
    return String.join("\n", texts);
  }

  private final class Processor extends HoldingProcessor<String> {
    private final String url;
    private int documents;

    Processor(UpdateRequestProcessor next, String url) {
      super(next);
      this.url = url;
    }

    @Override
    public void processAdd(AddUpdateCommand cmd) throws IOException {
      List<String> passages = commands(cmd.getSolrInputDocument());
      super.processAdd(cmd);
      pending.addAll(passages);
      if (++documents >= maxPending) {
        flush();
      }
    }

    @Override
    public void processDelete(DeleteUpdateCommand cmd) throws IOException {
      super.processDelete(cmd);
      if (cmd.isDeleteById()) {
        pending.add(deletePassagesOf(cmd.getId()));
      }
      flush();
    }

    @Override
    public void processCommit(CommitUpdateCommand cmd) throws IOException {
      super.processCommit(cmd);
      pending.add("\"commit\":" + Utils.toJSONString(Map.of("softCommit", cmd.softCommit)));
      flush();
    }

    /** Sends the held commands to the passages collection, in their order. */
    @Override
    protected void flush() throws IOException {
      documents = 0;
      if (pending.isEmpty()) {
        return;
      }
      String body = "{" + String.join(",", pending) + "}";
      int commands = pending.size();
      pending.clear();
      HttpRequest request =
          HttpRequest.newBuilder(URI.create(url + "?wt=json"))
              .timeout(timeout)
              .header("Content-Type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8))
              .build();
      HttpResponse<String> response;
      try {
        response = http.send(request, HttpResponse.BodyHandlers.ofString());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("passages: interrupted while writing to " + collection, e);
      }
      if (response.statusCode() != 200) {
        String reason = response.body();
        throw new SolrException(
            SolrException.ErrorCode.SERVER_ERROR,
            "passages: " + collection + " refused " + commands + " command(s) (HTTP "
                + response.statusCode() + "): "
                + reason.substring(0, Math.min(reason.length(), 500)));
      }
    }
  }
}
