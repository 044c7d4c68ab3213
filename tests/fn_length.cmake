# No function of src/, tools/, bench/ or examples/ over 80 lines without
# a comment saying why it must be long (scripts/check_fn_length.py, with
# scripts/fn_length_pending.txt): the checker on a planted tree, then on
# the repository.
srn_script_test(check_fn_length test_check_fn_length.sh LABELS "unit;fast")
