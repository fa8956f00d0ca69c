"""The readable summary `scratchformer graph` prints without --json."""

from __future__ import annotations

from .attribution import Node, target_name


def describe(node: Node) -> str:
    """'decoder layer 1 feature 123 at 2 “सेब”', 'encoder layer 0 error at 3 “eats”', 'source embedding at 0 “the”',
    'the logit of “है”'."""
    where = f"at {node.position} “{node.token}”"
    if node.kind == "feature":
        return f"{node.side} layer {node.layer} feature {node.feature} {where}"
    if node.kind == "error":
        return f"{node.side} layer {node.layer} error {where}"
    if node.kind == "embedding":
        return f"{'source' if node.side == 'encoder' else 'decoder input'} embedding {where}"
    return f"the logit of “{node.token}”" if node.versus is None else f"the logit difference {target_name(node)}"


def text_report(result, top: int = 12) -> str:
    g, k = result.graph, result.kept
    kept = result.kept_nodes()
    reads = g.nodes[g.logit_index]
    what = "The demeaned logit (minus the mean logit) of" if result.demeaned else "The logit of"
    named = f"“{g.token}” (id {g.token_id}"
    if reads.versus is not None:
        what, named = "The logit difference", f"{target_name(reads)} (ids {g.token_id} and {g.versus_id}"
    lines = [f"{what} {named}, {float(g.real[g.logit_index]):.4f}) at decoder position {g.position}, which reads "
             f"“{result.tokens['decoder'][g.position]}”."]  # fmt: skip
    if result.tokens["encoder"]:
        lines.append(f"Source: {' '.join(result.tokens['encoder'])}")
    lines.append(f"Replacement score {result.replacement:.3f}, completeness {result.completeness:.3f} (1: everything "
                 "runs through features, nothing through error nodes).")  # fmt: skip
    n_edges, kept_edges = int((g.adjacency != 0).sum()), int(k.edges.sum())
    lines.append(f"Nodes: {len(kept)} kept of {len(g.nodes)} ({g.n_features} features, {g.n_errors} error nodes, "
                 f"{g.n_embeddings} embeddings, the logit), carrying {100 * k.kept_influence:.1f} % of the influence; "
                 f"edges: {kept_edges} kept of {n_edges}.")  # fmt: skip
    lines.append(f"The replacement model reproduces the model's logits here within {g.logit_error:.1e}; built in "
                 f"{result.seconds:.2f} s.")  # fmt: skip
    lines += [f"note: {n}" for n in result.notes]
    order = sorted((i for i in kept if i != g.logit_index), key=lambda i: -float(k.influence[i]))[:top]
    lines += ["", "Most influential nodes (influence on the logit, over every path):"]
    for i in order:
        n = g.nodes[i]
        act = f"  activation {n.activation:.3f}" if n.activation is not None else ""
        lines.append(f"  {float(k.influence[i]):6.3f}  {describe(n)}{act}")
    into = [(float(g.adjacency[g.logit_index, s]), s) for s in kept if bool(k.edges[g.logit_index, s])]
    into.sort(key=lambda x: -abs(x[0]))
    lines += ["", f"Strongest direct edges into {describe(reads)} (bias {float(g.bias[g.logit_index]):+.3f}):"]
    lines += [f"  {w:+8.3f}  {describe(g.nodes[s])}" for w, s in into[:top]]
    return "\n".join(lines)
