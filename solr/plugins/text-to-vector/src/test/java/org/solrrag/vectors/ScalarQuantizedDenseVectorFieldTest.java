package org.solrrag.vectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.solrrag.vectors.ScalarQuantizedDenseVectorField.Quantization;

/** The quantized field type's parameters as a schema writes them (the type inside a real Solr:
 * tests/service/test_solr_versions.py). */
class ScalarQuantizedDenseVectorFieldTest {

  @Test
  void unsetOrBlankIsSevenBitsWithLucenesInterval() {
    assertEquals(new Quantization(7, null, false), Quantization.of(null, null, null, null));
    // a configset's ${collection.property:} left empty
    assertEquals(new Quantization(7, null, false), Quantization.of("", " ", "", ""));
  }

  @Test
  void fourBitsMayBeCompressedSevenMayNot() {
    assertEquals(new Quantization(4, null, true), Quantization.of("4", null, null, "true"));
    assertEquals(new Quantization(4, null, false), Quantization.of("4", null, null, "false"));
    IllegalArgumentException refused =
        assertThrows(IllegalArgumentException.class, () -> Quantization.of("7", null, null, "true"));
    assertTrue(refused.getMessage().contains("needs bits=4"), refused.getMessage());
  }

  @Test
  void onlyFourOrSevenBits() {
    for (String bits : new String[] {"5", "8", "1", "seven"}) {
      IllegalArgumentException refused = assertThrows(
          IllegalArgumentException.class, () -> Quantization.of(bits, null, null, null));
      assertEquals("bits must be 4 or 7, not '" + bits + "'", refused.getMessage());
    }
  }

  @Test
  void theIntervalIsBetweenNinetyAndAHundredPercentOrDynamic() {
    assertEquals(0.95f, Quantization.of(null, "0.95", null, null).confidenceInterval());
    assertEquals(0f, Quantization.of(null, null, "true", null).confidenceInterval());
    assertNull(Quantization.of(null, null, "false", null).confidenceInterval());
    for (String interval : new String[] {"0.5", "1.01", "0", "NaN", "most"}) {
      IllegalArgumentException refused = assertThrows(
          IllegalArgumentException.class, () -> Quantization.of(null, interval, null, null));
      assertTrue(refused.getMessage().contains("from 0.9 to 1.0"), refused.getMessage());
    }
    assertThrows(IllegalArgumentException.class, () -> Quantization.of(null, "0.95", "true", null));
    assertThrows(IllegalArgumentException.class, () -> Quantization.of(null, null, "yes", null));
  }
}
