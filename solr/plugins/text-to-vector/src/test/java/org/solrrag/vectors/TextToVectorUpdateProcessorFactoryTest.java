package org.solrrag.vectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.solr.common.SolrException;
import org.apache.solr.common.SolrInputDocument;
import org.apache.solr.update.AddUpdateCommand;
import org.apache.solr.update.DeleteUpdateCommand;
import org.apache.solr.update.processor.UpdateRequestProcessor;
import org.junit.jupiter.api.Test;

/** The processor between a loader and a recording next processor, the endpoint live. */
class TextToVectorUpdateProcessorFactoryTest {

  /** What reaches the next processor, in order. */
  static final class Recorder extends UpdateRequestProcessor {
    final List<String> seen = new ArrayList<>();
    final List<SolrInputDocument> added = new ArrayList<>();

    Recorder() {
      super(null);
    }

    @Override
    public void processAdd(AddUpdateCommand cmd) {
      seen.add("add " + cmd.getSolrInputDocument().getFieldValue("id"));
      added.add(cmd.getSolrInputDocument());
    }

    @Override
    public void processDelete(DeleteUpdateCommand cmd) {
      seen.add("delete " + cmd.getId());
    }

    @Override
    public void finish() {
      seen.add("finish");
    }
  }

  static UpdateRequestProcessor processor(String endpoint, Recorder next) {
    TextToVectorUpdateProcessorFactory factory = new TextToVectorUpdateProcessorFactory();
    factory.init(
        EmbeddingsEndpointTest.args(
            "inputField", "content", "outputField", "vector_384",
            "endpoint", endpoint, "model", EmbeddingsEndpointTest.MODEL, "batchSize", "2"));
    return factory.getInstance(null, null, next);
  }

  static SolrInputDocument document(String id, String content) {
    SolrInputDocument document = new SolrInputDocument();
    document.setField("id", id);
    if (content != null) {
      document.setField("content", content);
    }
    return document;
  }

  /** Adds as a loader does: one command object, cleared and reused for every document. */
  static void load(UpdateRequestProcessor processor, SolrInputDocument... documents)
      throws IOException {
    AddUpdateCommand cmd = new AddUpdateCommand(null);
    for (SolrInputDocument document : documents) {
      cmd.clear();
      cmd.solrDoc = document;
      processor.processAdd(cmd);
    }
  }

  @Test
  void everyDocumentAndPassageIsEmbeddedThenPassedOnInOrder() throws IOException {
    Recorder next = new Recorder();
    UpdateRequestProcessor processor = processor(EmbeddingsEndpointTest.endpoint(), next);
    SolrInputDocument parent = document("doc", "The lighthouse keeper lit the lamp.");
    parent.addChildDocument(document("doc_0", "In fog he sounded the horn."));
    SolrInputDocument titled = document("no-text", null);
    load(processor, parent, document("orchard", "Apple trees are pruned in winter."), titled);
    assertTrue(next.seen.isEmpty(), "held until the request ends");
    DeleteUpdateCommand delete = new DeleteUpdateCommand(null);
    delete.setId("old");
    processor.processDelete(delete);
    load(processor, document("after", "Glaciers retreat."));
    processor.finish();
    assertEquals(
        List.of("add doc", "add orchard", "add no-text", "delete old", "add after", "finish"),
        next.seen);
    assertEquals(384, next.added.get(0).getFieldValues("vector_384").size());
    assertEquals(384, parent.getChildDocuments().get(0).getFieldValues("vector_384").size());
    assertNull(titled.getFieldValue("vector_384"));
  }

  @Test
  void severalInputFieldsAreEmbeddedAsOneTextLineByLine() throws Exception {
    TextToVectorUpdateProcessorFactory factory = new TextToVectorUpdateProcessorFactory();
    factory.init(
        EmbeddingsEndpointTest.args(
            "inputField", "title", "inputField", "content", "outputField", "vector_384",
            "endpoint", EmbeddingsEndpointTest.endpoint(), "model", EmbeddingsEndpointTest.MODEL));
    Recorder next = new Recorder();
    UpdateRequestProcessor processor = factory.getInstance(null, null, next);
    SolrInputDocument titled = document("titled", "Apple trees are pruned in winter.");
    titled.setField("title", "Orchards");
    SolrInputDocument untitled = document("untitled", "Apple trees are pruned in winter.");
    untitled.setField("title", " ");
    load(processor, titled, untitled);
    processor.finish();
    List<float[]> expected =
        EmbeddingsEndpoint.fromArgs(
                EmbeddingsEndpointTest.args(
                    "endpoint", EmbeddingsEndpointTest.endpoint(), "model", EmbeddingsEndpointTest.MODEL))
            .embed(List.of("Orchards\nApple trees are pruned in winter.", "Apple trees are pruned in winter."));
    assertEquals(asFloats(expected.get(0)), new ArrayList<>(titled.getFieldValues("vector_384")));
    assertEquals(asFloats(expected.get(1)), new ArrayList<>(untitled.getFieldValues("vector_384")));
  }

  static List<Object> asFloats(float[] vector) {
    return new ArrayList<>(TextToVectorUpdateProcessorFactory.asList(vector));
  }

  @Test
  void aDocumentWithItsOwnVectorKeepsIt() throws IOException {
    Recorder next = new Recorder();
    UpdateRequestProcessor processor = processor(EmbeddingsEndpointTest.endpoint(), next);
    SolrInputDocument own = document("own", "Its own vector.");
    own.setField("vector_384", List.of(1.0f, 0.0f));
    load(processor, own);
    processor.finish();
    assertEquals(List.of(1.0f, 0.0f), new ArrayList<>(own.getFieldValues("vector_384")));
  }

  @Test
  void anEndpointDownFailsTheUpdateAndIndexesNothing() throws Exception {
    Recorder next = new Recorder();
    UpdateRequestProcessor processor = processor(EmbeddingsEndpointTest.deadEndpoint(), next);
    load(processor, document("a", "one"), document("b", "two"));
    SolrException error = assertThrows(SolrException.class, processor::finish);
    assertEquals(502, error.code());
    assertTrue(error.getMessage().contains("2 document(s) not indexed"), error.getMessage());
    assertTrue(next.added.isEmpty());
  }

  @Test
  void anAbsurdMaxPendingIsRefusedWithItsName() {
    for (String bad : new String[] {"0", "-3", "many"}) {
      TextToVectorUpdateProcessorFactory factory = new TextToVectorUpdateProcessorFactory();
      SolrException error =
          assertThrows(
              SolrException.class,
              () ->
                  factory.init(
                      EmbeddingsEndpointTest.args(
                          "inputField", "content", "outputField", "vector_384",
                          "endpoint", "http://127.0.0.1:1/v1/", "model", "m", "maxPending", bad)));
      assertTrue(error.getMessage().contains("maxPending"), error.getMessage());
    }
  }
}
