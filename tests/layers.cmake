# scripts/check_layers.py guards the layer order on every CI run
# (scripts/test.sh); this checks the checker on a fake source tree with
# planted violations (every include spelling, an ordered folder, calls from
# built objects).
srn_script_test(check_layers test_check_layers.sh LABELS "unit;fast")
