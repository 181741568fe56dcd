#!/bin/sh
# skip.sh COMPONENT REASON...: the ctest test that stands for the tests of an optional component
# that this build does not have (docs/operations/testing.md). Reports a skip (status 77, SKIP_RETURN_CODE)
# with the reason, or fails when GOSSAMER_REQUIRE names the component.
component="$1"
shift
case ",${GOSSAMER_REQUIRE:-}," in
  *",$component,"*)
    echo "required component $component (GOSSAMER_REQUIRE) is missing: $*" >&2
    exit 1 ;;
esac
echo "skipped (optional): $component: $*"
exit 77
