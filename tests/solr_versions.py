"""The Solr tests CI runs on every Solr version it tests: marked `solr_versions`
(tests/conftest.py), run by .ci/run on Solr 9.10.1 beside the whole suite on the default, 9.8.1
(`SOLR_VERSION=9.10.1 pytest -m solr_versions`; README, "Development").

What it covers: Solr's start and restart on its data (the launcher, every node of the version's
jars), every configset (ours, VectorMainQuantized, the testing ones standing for Datafari's and
other people's schemas), ingestion by the service and by a crawler's sync, BM25, kNN and hybrid
retrieval with and without ManifoldCF's security, the language chain (solr-langid 9.8.0 in
every version: Maven Central has no later one), our text-to-vector plugin built and tested against
the version, and quantized vectors. Not in it, on 9.8.1 only: clusters of several nodes, a
secured Solr, failover, and everything that does not depend on Solr's version.

An entry is a test file, or a test of one (all its parameters); tests/unit/test_solr_versions.py
checks that each names a test that exists.
"""

SUBSET = (
    "tests/service/test_solr_versions.py",
    "tests/service/test_solr_local.py::test_english_chain_stems_folds_and_drops_stop_words",
    "tests/service/test_solr_local.py::test_general_chain_folds_accents_without_stemming",
    "tests/service/test_solr_local.py::test_both_collections_exist_with_their_fields",
    "tests/service/test_solr_local.py"
    "::test_restart_keeps_the_index_and_what_vectormain_was_made_of",
    "tests/service/test_solr_local.py::test_a_folder_a_newer_solr_wrote_is_refused_to_an_older_one",
    "tests/service/test_retrieval.py::test_bm25_ranks_the_matching_document_first",
    "tests/service/test_retrieval.py::test_knn_finds_passages_by_meaning",
    "tests/service/test_retrieval.py::test_hybrid_fuses_both_rankings",
    # exact search of a small scope over quantized vectors: the floats' scores, every version
    "tests/service/test_knn_recall.py::test_a_scope_of_few_passages_is_scored_whole",
    "tests/service/test_vector.py::test_hybrid_rag_answers",
    "tests/service/test_french.py::test_each_document_gets_its_language_and_its_analysis",
    "tests/service/test_own_solr.py::test_bm25_answers_from_a_collection_with_its_own_field_names",
    "tests/service/test_own_solr.py"
    "::test_synced_passages_answer_by_knn_and_hybrid_within_manifoldcf_security",
    "tests/service/test_text_to_vector_plugin.py"
    "::test_the_plugins_java_tests_pass_against_the_local_model_server",
    "tests/service/test_text_to_vector_plugin.py"
    "::test_a_document_posted_straight_to_solr_is_found_by_meaning",
    "tests/service/test_text_to_vector_plugin.py"
    "::test_a_document_posted_to_fileshare_gets_its_passages_in_vectormain",
)


def in_subset(nodeid: str) -> bool:
    """Whether a collected test (its pytest node id) is one of SUBSET's."""
    test = nodeid.split("[", 1)[0]  # every parameter of a listed test
    return test in SUBSET or test.split("::", 1)[0] in SUBSET
