package org.solrrag.vectors;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.apache.solr.common.SolrException;
import org.apache.solr.common.SolrInputDocument;
import org.apache.solr.common.util.NamedList;
import org.apache.solr.request.SolrQueryRequest;
import org.apache.solr.response.SolrQueryResponse;
import org.apache.solr.update.AddUpdateCommand;
import org.apache.solr.update.CommitUpdateCommand;
import org.apache.solr.update.DeleteUpdateCommand;
import org.apache.solr.update.MergeIndexesCommand;
import org.apache.solr.update.processor.UpdateRequestProcessor;
import org.apache.solr.update.processor.UpdateRequestProcessorFactory;

/**
 * Embeds each document's {@code inputField} into its {@code outputField} (a DenseVectorField),
 * child documents (passages) included, through an OpenAI-compatible embeddings endpoint
 * ({@link EmbeddingsEndpoint}'s arguments). Several {@code inputField}s are embedded as one
 * text, their values joined by line breaks in the order given (the service embeds a passage as
 * its title, a line break, then its text: {@code title}, {@code content}).
 *
 * <p>The documents of one update request are held until the request ends (or another command,
 * a delete or a commit, comes: the order of commands is kept; or {@code maxPending} documents,
 * 1000, are held: memory stays bounded), then embedded in as few calls as {@code batchSize} allows and passed on. A
 * document that already has a vector keeps it; one without the text field gets none. If the
 * endpoint fails, the whole update fails with its reason and none of the held documents is
 * indexed: no document is ever indexed without its vector.
 *
 * <p>Place it before DistributedUpdateProcessorFactory, so that in SolrCloud the node receiving
 * the update embeds once, not every replica.
 */
public class TextToVectorUpdateProcessorFactory extends UpdateRequestProcessorFactory {
  static final int DEFAULT_MAX_PENDING = 1000;

  private List<String> inputFields;
  private String outputField;
  private int maxPending;
  private EmbeddingsEndpoint endpoint;

  @Override
  public void init(NamedList<?> args) {
    inputFields = new ArrayList<>();
    for (Object field : args.getAll("inputField")) {
      if (field != null && !field.toString().isBlank()) {
        inputFields.add(field.toString().trim());
      }
    }
    if (inputFields.isEmpty()) {
      required(args, "inputField"); // names what is missing
    }
    outputField = required(args, "outputField");
    try {
      maxPending = EmbeddingsEndpoint.number(args, "maxPending", DEFAULT_MAX_PENDING);
      if (maxPending < 1) {
        throw new IllegalArgumentException("maxPending must be at least 1, not " + maxPending);
      }
      endpoint = EmbeddingsEndpoint.fromArgs(args);
    } catch (IllegalArgumentException e) {
      throw new SolrException(
          SolrException.ErrorCode.SERVER_ERROR, "TextToVectorUpdateProcessorFactory: " + e.getMessage());
    }
  }

  @Override
  public UpdateRequestProcessor getInstance(
      SolrQueryRequest req, SolrQueryResponse rsp, UpdateRequestProcessor next) {
    return new Processor(next);
  }

  private static String required(NamedList<?> args, String name) {
    Object value = args.get(name);
    if (value == null || value.toString().isBlank()) {
      throw new SolrException(
          SolrException.ErrorCode.SERVER_ERROR,
          "TextToVectorUpdateProcessorFactory needs <str name=\"" + name + "\">");
    }
    return value.toString().trim();
  }

  private final class Processor extends HoldingProcessor<AddUpdateCommand> {

    Processor(UpdateRequestProcessor next) {
      super(next);
    }

    @Override
    public void processAdd(AddUpdateCommand cmd) throws IOException {
      // loaders may reuse their command for the next document: hold a copy
      pending.add((AddUpdateCommand) cmd.clone());
      if (pending.size() >= maxPending) {
        flush();
      }
    }

    @Override
    public void processDelete(DeleteUpdateCommand cmd) throws IOException {
      flush();
      super.processDelete(cmd);
    }

    @Override
    public void processCommit(CommitUpdateCommand cmd) throws IOException {
      flush();
      super.processCommit(cmd);
    }

    @Override
    public void processMergeIndexes(MergeIndexesCommand cmd) throws IOException {
      flush();
      super.processMergeIndexes(cmd);
    }

    /** Embeds the held documents, then passes them on in their order. */
    @Override
    protected void flush() throws IOException {
      if (pending.isEmpty()) {
        return;
      }
      List<SolrInputDocument> documents = new ArrayList<>();
      List<String> texts = new ArrayList<>();
      for (AddUpdateCommand cmd : pending) {
        collect(cmd.getSolrInputDocument(), documents, texts);
      }
      List<AddUpdateCommand> held = new ArrayList<>(pending);
      pending.clear();
      if (!texts.isEmpty()) {
        List<float[]> vectors;
        try {
          vectors = endpoint.embed(texts);
        } catch (EmbeddingsException e) {
          throw new EmbeddingsFailed(
              "text-to-vector: " + held.size() + " document(s) not indexed: " + e.getMessage(), e);
        }
        for (int i = 0; i < documents.size(); i++) {
          documents.get(i).setField(outputField, asList(vectors.get(i)));
        }
      }
      for (AddUpdateCommand cmd : held) {
        super.processAdd(cmd);
      }
    }

    /** The document and its children (passages) that have text to embed and no vector yet. */
    private void collect(
        SolrInputDocument document, List<SolrInputDocument> documents, List<String> texts) {
      String text = textOf(document);
      if (!text.isEmpty() && document.getFieldValue(outputField) == null) {
        documents.add(document);
        texts.add(text);
      }
      if (document.hasChildDocuments()) {
        for (SolrInputDocument child : document.getChildDocuments()) {
          collect(child, documents, texts);
        }
      }
      for (String name : document.getFieldNames()) {
        for (Object value : document.getFieldValues(name)) {
          if (value instanceof SolrInputDocument nested) {
            collect(nested, documents, texts);
          }
        }
      }
    }
  }

  /** The input fields' non-blank values, one per line; empty when there is none. */
  private String textOf(SolrInputDocument document) {
    List<String> lines = new ArrayList<>();
    for (String field : inputFields) {
      Collection<Object> values = document.getFieldValues(field);
      if (values == null) {
        continue;
      }
      for (Object value : values) {
        if (value != null && !(value instanceof SolrInputDocument) && !value.toString().isBlank()) {
          lines.add(value.toString());
        }
      }
    }
    return String.join("\n", lines);
  }

  static List<Float> asList(float[] vector) {
    List<Float> values = new ArrayList<>(vector.length);
    for (float value : vector) {
      values.add(value);
    }
    return values;
  }
}
