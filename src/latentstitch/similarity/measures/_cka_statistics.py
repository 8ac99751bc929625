"""Linear CKA in feature space, as statistics that accumulate: ``CKAStatistics`` holds the centred second moments
(``CrossMoments``) of x and y and, for the debiased estimator, sums of squared row norms (``RowNormSums``), and turns
them into the three HSIC terms; ``cka_ratio`` makes the index of them. ``cka`` uses them on the whole data at once,
``StreamingCKA`` chunk by chunk.

Debiased CKA in feature space (Kornblith's notebook):
``||Yc^T Xc||^2 - n/(n-2) <s_x, s_y> + ||Xc||_F^2 ||Yc||_F^2 / ((n-1)(n-2))``, s = squared row norms of Xc, Yc. The
row norms depend on the final mean, so the sums are kept about the accumulator's shift and moved to the mean at the
end.
"""

from __future__ import annotations

import torch

from latentstitch._core.moments import CrossMoments
from latentstitch._core.numerics import matmul, row_norms
from latentstitch._core.params import check_state
from latentstitch.similarity.measures._registry import ZeroVarianceError


class RowNormSums:
    """Sums of squared row norms of the shifted data, the extra statistics of debiased CKA in feature space.

    With d = a - shift_a, e = b - shift_b, q = |d|^2, r = |e|^2 (per row): ``qq = sum q^2``, ``qr = sum q r``,
    ``rr = sum r^2``, ``qa = sum q d``, ``qb = sum q e``, ``ra = sum r d``, ``rb = sum r e``. Together with the
    moments they move exactly to any other shift (``moved``), in particular to the means.
    """

    FIELDS = ("qq", "qr", "rr", "qa", "qb", "ra", "rb")

    def __init__(self, values: dict[str, torch.Tensor] | None = None):
        self.values = values

    def add(self, d: torch.Tensor, e: torch.Tensor) -> None:
        """Add a block of shifted rows ``d = a - shift_a``, ``e = b - shift_b`` (as yielded by
        ``CrossMoments.blocks``)."""
        norms = torch.stack([row_norms(d, squared=True), row_norms(e, squared=True)])
        (q, r), (qa, ra), (qb, rb) = norms.to(torch.float64), matmul(norms, d), matmul(norms, e)  # one pass each
        block = {"qq": q @ q, "qr": q @ r, "rr": r @ r, "qa": qa, "qb": qb, "ra": ra, "rb": rb}
        block.update({k: block[k].to(torch.float64) for k in ("qa", "qb", "ra", "rb")})
        self.values = block if self.values is None else {k: self.values[k] + block[k] for k in self.FIELDS}

    def moved(self, moments: CrossMoments, delta_a: torch.Tensor, delta_b: torch.Tensor) -> RowNormSums:
        """The sums about shifts moved by ``delta_a``, ``delta_b``, from these sums and ``moments`` (both about the
        old shifts). Expands q' = |d - delta|^2 = q + alpha with alpha = -2 d.delta + |delta|^2."""
        n, v = moments.count, self.values
        side = {
            "a": (moments.sum_a, delta_a, torch.trace(moments.aa)),
            "b": (moments.sum_b, delta_b, torch.trace(moments.bb)),
        }
        # cross_delta[(w, u)] = S_wu delta_u, with S_wu = sum_i w_i u_i^T: the only d x d products needed.
        cross_delta = {
            ("a", "a"): moments.aa @ delta_a,
            ("b", "a"): moments.ab.T @ delta_a,
            ("a", "b"): moments.ab @ delta_b,
            ("b", "b"): moments.bb @ delta_b,
        }
        norm_times = {("a", "a"): v["qa"], ("a", "b"): v["qb"], ("b", "a"): v["ra"], ("b", "b"): v["rb"]}

        def alpha_sum(u: str) -> torch.Tensor:  # sum_i alpha_u,i
            total, delta, _ = side[u]
            return -2 * delta @ total + n * (delta @ delta)

        def alpha_times(u: str, w: str) -> torch.Tensor:  # sum_i alpha_u,i w_i
            delta = side[u][1]
            return -2 * cross_delta[(w, u)] + (delta @ delta) * side[w][0]

        def norm_alpha(u: str, w: str) -> torch.Tensor:  # sum_i q_u,i alpha_w,i
            delta = side[w][1]
            return -2 * delta @ norm_times[(u, w)] + (delta @ delta) * side[u][2]

        def alpha_alpha(u: str, w: str) -> torch.Tensor:  # sum_i alpha_u,i alpha_w,i
            (total_u, du, _), (total_w, dw, _) = side[u], side[w]
            return (
                4 * du @ cross_delta[(u, w)]
                - 2 * (dw @ dw) * (du @ total_u)
                - 2 * (du @ du) * (dw @ total_w)
                + n * (du @ du) * (dw @ dw)
            )

        def moved_norm_times(u: str, w: str) -> torch.Tensor:  # sum_i q'_u,i (w_i - delta_w)
            return norm_times[(u, w)] - side[u][2] * side[w][1] + alpha_times(u, w) - side[w][1] * alpha_sum(u)

        def moved_products(u: str, w: str, key: str) -> torch.Tensor:  # sum_i q'_u,i q'_w,i
            return v[key] + norm_alpha(u, w) + norm_alpha(w, u) + alpha_alpha(u, w)

        return RowNormSums(
            {
                "qq": moved_products("a", "a", "qq"),
                "qr": moved_products("a", "b", "qr"),
                "rr": moved_products("b", "b", "rr"),
                "qa": moved_norm_times("a", "a"),
                "qb": moved_norm_times("a", "b"),
                "ra": moved_norm_times("b", "a"),
                "rb": moved_norm_times("b", "b"),
            }
        )


class CKAStatistics:
    """Sufficient statistics of linear CKA in feature space: ``CrossMoments`` (+ row-norm sums when debiased).

    Products are taken in the data's precision (float32 stays float32, see ``CrossMoments(precision="input")``) and
    accumulated in float64.
    """

    def __init__(self, debiased: bool, *, track_grad: bool = False):
        self.debiased = debiased
        self.moments = CrossMoments(
            precision="input", track_grad=track_grad, names=("x", "y"), max_order=4 if debiased else 2
        )
        self.row_norms = RowNormSums() if debiased else None

    def update(self, x: torch.Tensor, y: torch.Tensor, *, finite_checked: bool = False) -> CKAStatistics:
        if self.row_norms is None:
            self.moments.update(x, y, finite_checked=finite_checked)
            return self
        for d, e in self.moments.blocks(x, y, finite_checked=finite_checked):
            self.row_norms.add(d, e)
        return self

    def merge(self, other: CKAStatistics) -> CKAStatistics:
        out = CKAStatistics(self.debiased, track_grad=self.moments.track_grad)
        out.moments = self.moments.merge(other.moments)
        if self.debiased:
            mine, theirs = self.row_norms.values, other.row_norms.values
            if mine is None or theirs is None:
                out.row_norms = RowNormSums(mine if theirs is None else theirs)
            else:
                # Bring the other's sums to our shift, then add.
                moved = other.row_norms.moved(
                    other.moments,
                    self.moments.shift_a - other.moments.shift_a,
                    self.moments.shift_b - other.moments.shift_b,
                ).values
                out.row_norms = RowNormSums({k: mine[k] + moved[k] for k in RowNormSums.FIELDS})
        return out

    def hsic_terms(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Scaled HSIC(X, Y), HSIC(X, X), HSIC(Y, Y) (scales cancel in CKA): Frobenius inner products of the
        centred (biased) or U-centred (debiased) Gram matrices, computed from p x p and q x q moments."""
        m = self.moments
        n = m.count
        cxx, cxy, cyy = m.centered_aa(), m.centered_ab(), m.centered_bb()
        xy, xx, yy = (torch.linalg.matrix_norm(c) ** 2 for c in (cxy, cxx, cyy))
        if not self.debiased:
            return xy, xx, yy
        about_mean = self.row_norms.moved(m, m.sum_a / n, m.sum_b / n).values
        norm_x, norm_y = torch.trace(cxx), torch.trace(cyy)
        return (
            debiased_hsic(xy, about_mean["qr"], norm_x, norm_y, n),
            debiased_hsic(xx, about_mean["qq"], norm_x, norm_x, n),
            debiased_hsic(yy, about_mean["rr"], norm_y, norm_y, n),
        )

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {f"moments.{k}": v for k, v in self.moments.state_dict().items()}
        if self.row_norms is not None and self.row_norms.values is not None:
            state.update({f"row_norms.{k}": v for k, v in self.row_norms.values.items()})
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor], debiased: bool) -> CKAStatistics:
        norms = tuple(f"row_norms.{k}" for k in RowNormSums.FIELDS) if debiased else ()
        check_state(state, ("moments.count",), [f"moments.{k}" for k in CrossMoments.STATE_KEYS[1:]] + list(norms))
        out = cls(debiased)
        out.moments = CrossMoments.from_state_dict(
            {k.split(".", 1)[1]: v for k, v in state.items() if k.startswith("moments.")},
            precision="input",
            names=("x", "y"),
            max_order=4 if debiased else 2,
        )
        if debiased and "row_norms.qq" in state:
            out.row_norms = RowNormSums({k: state[f"row_norms.{k}"] for k in RowNormSums.FIELDS})
        return out


def debiased_hsic(
    frobenius: torch.Tensor, norms_dot: torch.Tensor, total_x: torch.Tensor, total_y: torch.Tensor, n: int
):
    # Kornblith's feature-space form of n(n-3) * unbiased HSIC (Song et al. 2012), for column-centred data.
    return frobenius - n / (n - 2) * norms_dot + total_x * total_y / ((n - 1) * (n - 2))


def cka_ratio(xy: torch.Tensor, xx: torch.Tensor, yy: torch.Tensor, measure: str = "CKA") -> torch.Tensor:
    """``HSIC(X, Y) / sqrt(HSIC(X, X) HSIC(Y, Y))``; a representation with zero self-HSIC is an error, not NaN."""
    if not xx > 0:
        raise ZeroVarianceError("x", measure)
    if not yy > 0:
        raise ZeroVarianceError("y", measure)
    return xy / (torch.sqrt(xx) * torch.sqrt(yy))
