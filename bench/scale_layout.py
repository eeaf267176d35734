"""How a benchmark's VectorMain is laid out (issue 82): the HNSW graph's density and the largest
segment Lucene's merges may write, as edits of a shipped configset.

A denser graph (M 32, beam 200 against the shipped 16 / 100) finds more of the true neighbours
at the same depth; segments capped near 125k passages keep each graph as good as the 100k
index's, where a single graph over a million loses the needles (bench/RESULTS.md, "Scale").
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

CONFIGSETS = Path(__file__).resolve().parents[1] / "solr" / "configsets"
VECTOR_TYPE = '<fieldType name="knn_vector_384" '


@dataclass(frozen=True)
class Layout:
    configset: str = "VectorMain"  # the shipped configset it edits
    graph: dict[str, str] = field(default_factory=dict)  # the vector field type's attributes
    segment_mb: int = 0  # TieredMergePolicy's maxMergedSegmentMB; 0: Lucene's (5 GB)

    def write(self, into: Path) -> Path:
        """The edited configset's conf/ folder, written under `into`."""
        conf = into / "conf"
        shutil.copytree(CONFIGSETS / self.configset / "conf", conf)
        schema = conf / "schema.xml"
        text = schema.read_text()
        assert VECTOR_TYPE in text, f"{schema}: no {VECTOR_TYPE}"
        extra = "".join(f'{key}="{value}" ' for key, value in self.graph.items())
        schema.write_text(text.replace(VECTOR_TYPE, VECTOR_TYPE + extra))
        if self.segment_mb:
            solrconfig = conf / "solrconfig.xml"
            policy = (
                '<mergePolicyFactory class="org.apache.solr.index.TieredMergePolicyFactory">'
                f'<double name="maxMergedSegmentMB">{self.segment_mb}</double>'
                "</mergePolicyFactory>\n  </indexConfig>"
            )
            text = solrconfig.read_text()
            assert text.count("</indexConfig>") == 1, f"{solrconfig}: no single </indexConfig>"
            solrconfig.write_text(text.replace("</indexConfig>", policy))
        return conf


DENSE = {"hnswMaxConnections": "32", "hnswBeamWidth": "200"}
# the text-holding VectorMain (bench.scale --layout): ~4 KB a passage, so 512 MB is ~125k
LAYOUTS = {
    "shipped": Layout(),
    "dense-capped": Layout(graph=DENSE, segment_mb=512),
}
