package org.solrrag.vectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.solr.common.SolrInputDocument;
import org.apache.solr.common.util.NamedList;
import org.junit.jupiter.api.Test;

/** A document of any size a crawler writes is cut into passages up to maxChars only. */
class PassagesUpdateProcessorFactoryTest {

  private static PassagesUpdateProcessorFactory factory(String maxChars) {
    NamedList<Object> args = new NamedList<>();
    args.add("collection", "VectorMain");
    args.add("size", "20");
    args.add("overlap", "0");
    if (maxChars != null) {
      args.add("maxChars", maxChars);
    }
    PassagesUpdateProcessorFactory factory = new PassagesUpdateProcessorFactory();
    factory.init(args);
    return factory;
  }

  @Test
  void aHugeDocumentYieldsThePassagesOfItsFirstMaxCharsOnly() {
    SolrInputDocument document = new SolrInputDocument();
    document.addField("id", "huge");
    document.addField("content", "word ".repeat(200_000)); // a million characters
    List<String> commands = factory("100").commands(document);
    assertTrue(commands.get(0).startsWith("\"delete\":"), commands.get(0));
    assertEquals(1 + 5, commands.size(), commands.toString()); // 100 characters: 5 passages
    assertEquals(1 + 50_000, factory(null).commands(document).size()); // the default: 5,000,000
  }

  @Test
  void aCutNeverSplitsASurrogatePair() {
    assertEquals("ab", PassagesUpdateProcessorFactory.atMost("ab\uD83D\uDE00c", 3));
    assertEquals("ab\uD83D\uDE00", PassagesUpdateProcessorFactory.atMost("ab\uD83D\uDE00c", 4));
    assertEquals("short", PassagesUpdateProcessorFactory.atMost("short", 100));
  }
}
