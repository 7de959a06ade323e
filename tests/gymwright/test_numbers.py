import pytest
from django.template import Context, Template

from gymwright.numbers import format_number, format_percent


@pytest.mark.parametrize(
    "value, expected",
    [
        (-0.0, "0"),
        (-8 * 0.0, "0"),
        (-0.001, "0"),
        (0, "0"),
        (5, "5"),
        (2.5, "2.5"),
        (-8, "-8"),
        (1 / 3, "0.33"),
        (123456.78, "123456.78"),
        (None, "–"),
        ("", "–"),
        (2.0e16, "2e+16"),
    ],
)
def test_a_number_is_rounded_without_trailing_zeros_and_never_minus_zero(value, expected):
    assert format_number(value) == expected


def test_fixed_keeps_the_digits_and_still_never_says_minus_zero():
    assert format_number(0.5, 3, fixed=True) == "0.500"
    assert format_number(-0.0001, 2, fixed=True) == "0.00"
    assert format_percent(0.25) == "25 %" and format_percent(-0.0) == "0 %" and format_percent(None) == "–"


def test_the_template_filters_are_the_same_formatter():
    rendered = Template("{% load previews %}{{ a|number }} {{ a|fixed:2 }} {{ b|percent }} {{ ms|seconds }}").render(
        Context({"a": -0.0, "b": 0.5, "ms": 1500})
    )
    assert rendered == "0 0.00 50 % 1.5 s"
