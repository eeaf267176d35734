package org.solrrag.vectors;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.solr.update.RollbackUpdateCommand;
import org.apache.solr.update.processor.UpdateRequestProcessor;

/**
 * A processor that holds what an update request brings ({@code pending}) and acts on it in one
 * go ({@link #flush()}): when the request ends, or sooner as its subclass decides; a rollback
 * drops what is held.
 */
abstract class HoldingProcessor<T> extends UpdateRequestProcessor {
  protected final List<T> pending = new ArrayList<>();

  HoldingProcessor(UpdateRequestProcessor next) {
    super(next);
  }

  /** Acts on what is held, in its order, and holds nothing after. */
  protected abstract void flush() throws IOException;

  @Override
  public void processRollback(RollbackUpdateCommand cmd) throws IOException {
    pending.clear();
    super.processRollback(cmd);
  }

  @Override
  public void finish() throws IOException {
    flush();
    super.finish();
  }
}
