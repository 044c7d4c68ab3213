# Every path and link in the repository's Markdown points at something in
# the repository (scripts/check_doc_links.py): the real docs, and the
# checker itself on a planted tree.
srn_script_test(doc_links test_doc_links.sh LABELS unit fast)
