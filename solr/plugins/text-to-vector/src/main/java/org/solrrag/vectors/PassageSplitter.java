package org.solrrag.vectors;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/**
 * A text cut into passages exactly as the service cuts it (service/text/chunk.py: langchain's
 * RecursiveCharacterTextSplitter): by paragraph, then line, sentence, word, character, each
 * separator kept at the end of its piece; pieces merged up to {@code size} characters (code
 * points, as Python counts), consecutive passages sharing up to {@code overlap} characters
 * (at most half the size); passages stripped of white space, blank ones dropped.
 */
final class PassageSplitter {
  private static final List<String> SEPARATORS = List.of("\n\n", "\n", ". ", " ", "");

  private final int size;
  private final int overlap;

  PassageSplitter(int size, int overlap) {
    if (size < 1 || overlap < 0) {
      throw new IllegalArgumentException(
          "passage size must be at least 1 and overlap at least 0, not " + size + ", " + overlap);
    }
    this.size = size;
    this.overlap = Math.min(overlap, size / 2);
  }

  List<String> split(String text) {
    List<String> passages = new ArrayList<>();
    if (text == null || strip(text).isEmpty()) {
      return passages;
    }
    for (String passage : split(text, SEPARATORS)) {
      if (!strip(passage).isEmpty()) {
        passages.add(passage);
      }
    }
    return passages;
  }

  private List<String> split(String text, List<String> separators) {
    String separator = separators.get(separators.size() - 1);
    List<String> finer = List.of();
    for (int i = 0; i < separators.size(); i++) {
      String candidate = separators.get(i);
      if (candidate.isEmpty()) {
        separator = candidate;
        break;
      }
      if (text.contains(candidate)) {
        separator = candidate;
        finer = separators.subList(i + 1, separators.size());
        break;
      }
    }
    List<String> chunks = new ArrayList<>();
    List<String> small = new ArrayList<>();
    for (String piece : pieces(text, separator)) {
      if (length(piece) < size) {
        small.add(piece);
        continue;
      }
      if (!small.isEmpty()) {
        chunks.addAll(merge(small));
        small = new ArrayList<>();
      }
      if (finer.isEmpty()) {
        chunks.add(piece);
      } else {
        chunks.addAll(split(piece, finer));
      }
    }
    if (!small.isEmpty()) {
      chunks.addAll(merge(small));
    }
    return chunks;
  }

  /** The text cut after each separator (kept at the end of its piece); "" cuts characters. */
  static List<String> pieces(String text, String separator) {
    List<String> pieces = new ArrayList<>();
    if (separator.isEmpty()) {
      text.codePoints().forEach(point -> pieces.add(new String(Character.toChars(point))));
      return pieces;
    }
    int start = 0;
    for (int at = text.indexOf(separator); at >= 0; at = text.indexOf(separator, start)) {
      pieces.add(text.substring(start, at + separator.length()));
      start = at + separator.length();
    }
    pieces.add(text.substring(start));
    pieces.removeIf(String::isEmpty);
    return pieces;
  }

  /** Small pieces joined into passages of at most {@code size}, sharing {@code overlap}. */
  private List<String> merge(List<String> pieces) {
    List<String> passages = new ArrayList<>();
    Deque<String> current = new ArrayDeque<>();
    int total = 0;
    for (String piece : pieces) {
      int length = length(piece);
      if (total + length > size && !current.isEmpty()) {
        addJoined(current, passages);
        while (total > overlap || (total + length > size && total > 0)) {
          total -= length(current.removeFirst());
        }
      }
      current.addLast(piece);
      total += length;
    }
    addJoined(current, passages);
    return passages;
  }

  private static void addJoined(Deque<String> pieces, List<String> passages) {
    String joined = strip(String.join("", pieces));
    if (!joined.isEmpty()) {
      passages.add(joined);
    }
  }

  static int length(String text) {
    return text.codePointCount(0, text.length());
  }

  /** Python's str.strip(): the white space str.isspace() knows, at both ends. */
  static String strip(String text) {
    int start = 0;
    int end = text.length();
    while (start < end && isSpace(text.codePointAt(start))) {
      start += Character.charCount(text.codePointAt(start));
    }
    while (end > start && isSpace(text.codePointBefore(end))) {
      end -= Character.charCount(text.codePointBefore(end));
    }
    return text.substring(start, end);
  }

  private static boolean isSpace(int point) {
    return Character.isWhitespace(point) || Character.isSpaceChar(point) || point == 0x85;
  }
}
