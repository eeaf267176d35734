"""Static checks of what lets Solr 9.10.1 run beside 9.8.1 (issue 82): the subset CI runs on both
names tests that exist, and VectorMainQuantized stays VectorMain but for its vectors."""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from tests.solr_versions import SUBSET, in_subset

ROOT = Path(__file__).resolve().parents[2]
CONFIGSETS = ROOT / "solr" / "configsets"
QUANTIZED_CLASS = "org.solrrag.vectors.ScalarQuantizedDenseVectorField"


def test_every_entry_of_the_subset_names_a_test_that_exists() -> None:
    for entry in SUBSET:
        path, _, name = entry.partition("::")
        assert (ROOT / path).is_file(), entry
        if name:
            tree = ast.parse((ROOT / path).read_text())
            defined = {
                node.name
                for node in tree.body
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            assert name in defined, entry


def test_a_listed_test_is_in_the_subset_with_each_of_its_parameters() -> None:
    file_test = "tests/service/test_solr_versions.py::test_every_configset_loads"
    assert in_subset(file_test)
    one = "tests/service/test_own_solr.py::test_bm25_answers_from_a_collection_with_its_own_"
    assert in_subset(f"{one}field_names[name_s body_txt]")
    assert not in_subset("tests/service/test_own_solr.py::test_the_cli_syncs_with_progress")


def elements(path: Path) -> ElementTree.Element:
    """The file's XML without its comments (ElementTree drops them)."""
    return ElementTree.parse(path).getroot()


def canonical(element: ElementTree.Element, skip: set | None = None) -> list:
    """The element's children as comparable tuples, but those `skip` names (tag, or tag and
    name)."""
    skip = skip or set()
    kept = []
    for child in element:
        if (child.tag, child.get("name", "")) in skip or child.tag in skip:
            continue
        kept.append((child.tag, sorted(child.attrib.items()), (child.text or "").strip(),
                     canonical(child)))  # fmt: skip
    return kept


def test_vectormain_quantized_is_vectormain_but_for_its_vectors() -> None:
    plain, quantized = CONFIGSETS / "VectorMain", CONFIGSETS / "VectorMainQuantized"
    files = {p.relative_to(plain) for p in plain.rglob("*") if p.is_file()}
    assert {p.relative_to(quantized) for p in quantized.rglob("*") if p.is_file()} == files | {
        Path("variant-of")
    }
    lines = (quantized / "variant-of").read_text().splitlines()
    assert [line for line in lines if line.strip() and not line.startswith("#")] == ["VectorMain"]
    for name in files - {Path("conf/solrconfig.xml"), Path("conf/schema.xml")}:
        assert (plain / name).read_bytes() == (quantized / name).read_bytes(), name
    # solrconfig.xml: the same but for the codec factory, ours
    config = elements(quantized / "conf/solrconfig.xml")
    assert config.find("codecFactory").get("class") == (
        "org.solrrag.vectors.QuantizedVectorsCodecFactory"
    )
    assert canonical(config, {"codecFactory"}) == canonical(
        elements(plain / "conf/solrconfig.xml"), {"codecFactory"}
    )
    # schema.xml: the same fields, the vector types quantized, of the same dimension and similarity
    schema, plain_schema = (
        elements(quantized / "conf/schema.xml"),
        elements(plain / "conf/schema.xml"),
    )
    vector_types = {
        ("fieldType", t.get("name")) for t in plain_schema.iter("fieldType")
        if t.get("class") == "solr.DenseVectorField"
    }  # fmt: skip
    assert len(vector_types) == 5
    assert canonical(schema, vector_types) == canonical(plain_schema, vector_types)
    for _, name in vector_types:
        (before,) = [t for t in plain_schema.iter("fieldType") if t.get("name") == name]
        (after,) = [t for t in schema.iter("fieldType") if t.get("name") == name]
        assert after.get("class") == QUANTIZED_CLASS
        # every attribute of VectorMain's type but its class, the same: dimension, similarity,
        # the graph (VectorMain's dense one: at 1M, in its capped segments, rescored by the
        # floats, recall@10 is the float graph's within 0.01; bench/RESULTS.md "Scale")
        assert {"hnswMaxConnections", "hnswBeamWidth", "vectorDimension"} <= set(before.attrib)
        for attribute in set(before.attrib) - {"class"}:
            assert after.get(attribute) == before.get(attribute), (name, attribute)
        # and nothing else but the quantization's parameters
        assert set(after.attrib) - set(before.attrib) == {
            "bits", "compress", "confidenceInterval", "dynamicConfidenceInterval"
        }, name  # fmt: skip
        # each parameter a collection property, unset by default
        assert after.get("bits") == "${vectors.bits:}"
        assert after.get("compress") == "${vectors.compress:}"


def test_only_variants_are_configsets_without_a_collection_of_their_own() -> None:
    variants = {p.name for p in CONFIGSETS.iterdir() if (p / "variant-of").is_file()}
    assert variants == {"VectorMainQuantized"}
