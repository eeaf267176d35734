package org.solrrag.vectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The splitter's rules, as the service's Chunker gives them (tests/service/test_own_solr.py
 * checks the two agree on the test corpus). */
class PassageSplitterTest {

  @Test
  void paragraphsComeFirst() {
    assertEquals(
        List.of("First paragraph.", "Second one here."),
        new PassageSplitter(20, 0).split("First paragraph.\n\nSecond one here."));
  }

  @Test
  void aLongSentenceIsCutAtWordsWithinTheSize() {
    String text = "alpha beta gamma delta epsilon zeta eta theta iota kappa";
    List<String> passages = new PassageSplitter(16, 0).split(text);
    // the separator stays with its word: "alpha beta gamma " is 17 characters
    assertEquals(
        List.of("alpha beta", "gamma delta", "epsilon zeta", "eta theta iota", "kappa"), passages);
    for (String passage : passages) {
      assertTrue(PassageSplitter.length(passage) <= 16, passage);
    }
  }

  @Test
  void neighboursShareTheOverlap() {
    List<String> passages = new PassageSplitter(12, 6).split("one two three four five six");
    assertEquals(List.of("one two", "two three", "three four", "four five", "five six"), passages);
  }

  @Test
  void blankTextHasNoPassageAndCodePointsCountAsOne() {
    assertEquals(List.of(), new PassageSplitter(10, 0).split(" \n\n\u00a0 "));
    assertEquals(List.of("\uD83D\uDE00\uD83D\uDE00", "\uD83D\uDE00"),
        new PassageSplitter(2, 0).split("\uD83D\uDE00\uD83D\uDE00\uD83D\uDE00"));
  }

  @Test
  void aBadSizeIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> new PassageSplitter(0, 0));
  }
}
