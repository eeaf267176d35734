"""How a benchmark's VectorMain is laid out (issue 82): the HNSW graph's density and the largest
segment Lucene's merges may write, as edits of a shipped configset.

The shipped VectorMain (since 2026-12-07) has the dense graph (M 32, beam 200) and merges capped
at 512 MB, about 125k passages with their text: at a million passages, each segment's graph
stays as good as the 100k index's, where one graph over a million loses the needles
(bench/RESULTS.md, "Scale"). `sparse` is the layout before it (Lucene's 16 / 100, its 5 GB
merges), kept to measure the two side by side.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

CONFIGSETS = Path(__file__).resolve().parents[1] / "solr" / "configsets"
VECTOR_TYPE = re.compile(r'<fieldType name="knn_vector_384" [^>]*/>', re.S)
POLICY = re.compile(r"\s*<mergePolicyFactory .*?</mergePolicyFactory>", re.S)


@dataclass(frozen=True)
class Layout:
    configset: str = "VectorMain"  # the shipped configset it edits
    graph: dict[str, str] = field(default_factory=dict)  # the 384-d field type's attributes
    segment_mb: int | None = None  # maxMergedSegmentMB; 0: Lucene's (5 GB); None: as shipped

    def write(self, into: Path) -> Path:
        """The edited configset's conf/ folder, written under `into`."""
        conf = into / "conf"
        shutil.copytree(CONFIGSETS / self.configset / "conf", conf)
        schema = conf / "schema.xml"
        text = schema.read_text()
        tag = VECTOR_TYPE.search(text)
        assert tag, f"{schema}: no knn_vector_384 field type"
        element = tag.group(0)
        for key, value in self.graph.items():
            element = re.sub(rf'\s{key}="[^"]*"', "", element)
            element = element.replace("/>", f' {key}="{value}"/>')
        schema.write_text(text[: tag.start()] + element + text[tag.end() :])
        if self.segment_mb is not None:
            solrconfig = conf / "solrconfig.xml"
            text = POLICY.sub("", solrconfig.read_text())
            assert text.count("</indexConfig>") == 1, f"{solrconfig}: no single </indexConfig>"
            if self.segment_mb:
                policy = (
                    '<mergePolicyFactory class="org.apache.solr.index.TieredMergePolicyFactory">'
                    f'<double name="maxMergedSegmentMB">{self.segment_mb}</double>'
                    "</mergePolicyFactory>\n  </indexConfig>"
                )
                text = text.replace("</indexConfig>", policy)
            solrconfig.write_text(text)
        return conf


def force_merge(solr_url: str, collection: str, segments: int) -> float:
    """`collection` force-merged to `segments` segments (Lucene rebuilds the merged graphs);
    the seconds it took."""
    began = time.perf_counter()
    httpx.get(
        f"{solr_url}/{collection}/update",
        params={"optimize": "true", "maxSegments": segments, "waitSearcher": "true"},
        timeout=None,
    ).raise_for_status()
    return time.perf_counter() - began


DENSE = {"hnswMaxConnections": "32", "hnswBeamWidth": "200"}
SPARSE = {"hnswMaxConnections": "16", "hnswBeamWidth": "100"}  # Lucene's defaults
LAYOUTS = {
    "shipped": Layout(),
    # the shipped layout, named as it was measured before it shipped (its --data keeps the name)
    "dense-capped": Layout(graph=DENSE, segment_mb=512),
    "sparse": Layout(graph=SPARSE, segment_mb=0),
}
