"""A checked bridge between two models' embeddings: make a new model's vectors usable where an old model's were.

``Bridge().fit(source, target)`` takes parallel anchors (the same items embedded by the new model, ``source``, and
by the old one, ``target``), tries every route of ``ROUTES`` by k-fold cross-validation on the anchors (each held-out
anchor against every target vector given), chooses one without labels (``select_route`` on ``SELECTION_SCORE``;
``Bridge.selection_rule()`` in words), reports every score with its spread over folds (``routes_``, one
``RouteScore`` per route; ``budget_``, one ``BudgetRow`` per anchor count) and what to expect in the user's units
(``estimate_``, a ``QualityEstimate`` with a 90% interval). ``transform(new_source)`` then returns what the old
model's consumer reads. Two families of route:

- **translation** into the target's absolute space (ridge least squares with the ridge chosen by cross-validation,
  Procrustes, ...): the old head or index is reused as it is;
- **relative** (cosine similarities to the anchors, centred, robust): a head is trained once on the target's
  relative vectors (``Bridge.fit_head``) and reads the new model's.

With unpaired vectors of both models (``fit(..., source_pool=, target_pool=)``), the semi-supervised routes of
``POOL_ROUTES`` join the candidates. ``register_route(name, factory, family=...)`` adds a route. The command line:
``latentstitch bridge fit SOURCE TARGET -o bridge.safetensors`` and ``latentstitch bridge apply bridge.safetensors
NEW -o OUT``; files are read by ``latentstitch.embeddings``.
"""

from latentstitch.bridge._bridge import Bridge, BridgeWarning
from latentstitch.bridge._crossval import CLEAR_Z, MIN_PER_FOLD
from latentstitch.bridge._ensemble import ENSEMBLE_SIZE, StackedRoute
from latentstitch.bridge._estimate import QualityEstimate
from latentstitch.bridge._head import LinearHead
from latentstitch.bridge._relative import RelativeRoute
from latentstitch.bridge._report import bridge_report, route_table
from latentstitch.bridge._results import BudgetRow, RouteScore
from latentstitch.bridge._routes import (
    AUTO_ROUTES,
    FAMILIES,
    POOL_ROUTES,
    ROUTES,
    RouteSpec,
    get_route,
    register_route,
    resolve_routes,
)
from latentstitch.bridge._scores import SCORES, chance_mrr, pair_scores
from latentstitch.bridge._select import (
    CONSUMER_SCORES,
    CONSUMERS,
    SELECTABLE,
    SELECTION_RULE,
    SELECTION_SCORE,
    rule_sentence,
    select_route,
)

__all__ = [
    "AUTO_ROUTES",
    "CLEAR_Z",
    "CONSUMERS",
    "CONSUMER_SCORES",
    "ENSEMBLE_SIZE",
    "FAMILIES",
    "MIN_PER_FOLD",
    "POOL_ROUTES",
    "ROUTES",
    "SCORES",
    "SELECTABLE",
    "SELECTION_RULE",
    "SELECTION_SCORE",
    "Bridge",
    "BridgeWarning",
    "BudgetRow",
    "LinearHead",
    "QualityEstimate",
    "RelativeRoute",
    "RouteScore",
    "RouteSpec",
    "StackedRoute",
    "bridge_report",
    "chance_mrr",
    "get_route",
    "pair_scores",
    "register_route",
    "resolve_routes",
    "route_table",
    "rule_sentence",
    "select_route",
]
