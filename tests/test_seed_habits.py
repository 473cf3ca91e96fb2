"""Habits of torchrecorder 1.0.3's, scio's and torchfunc's users that programs written the way
their documentation shows rely on (each test is such a program, cut down)."""

from __future__ import annotations

import pytest
from torch import nn

import torchrecorder
from torchrecorder.nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode
from torchrecorder.renderer import GraphvizStyler
from torchrecorder.renderer.styler import is_seed_styler

from .dot_parse import parse_dot


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 4), nn.Tanh()))


class _StylesInInit(GraphvizStyler):
    """1.0.3's way to recolour a node class: edit ``self.styles`` once, in ``__init__``."""

    def __init__(self, **styler_args):
        super().__init__(**styler_args)
        self.styles[ParamNode]["fillcolor"] = "pink"
        self.styles[LayerNode]["fillcolor"] = "gold"

    def style_edge(self, fnode, tnode):
        return {"color": "red"} if isinstance(tnode, LayerNode) else {}


def test_a_styler_setting_styles_of_parameter_nodes_in_init_gets_the_parameters() -> None:
    assert is_seed_styler(_StylesInInit)
    rec = torchrecorder.record(_mlp(), "net", (1, 3))
    dot = parse_dot(torchrecorder.make_dot(rec, 2, _StylesInInit).source)
    pink = [n for n, attrs in dot.node_attrs.items() if attrs.get("fillcolor") == "pink"]
    assert len(pink) == 2  # weight and bias of the Linear at depth 1 (1.0.3 drew them too)
    assert sum(1 for attrs in dot.edge_attrs if attrs.get("color") == "red") >= 2


def test_a_styler_naming_only_todays_node_classes_keeps_todays_picture() -> None:
    class Ops(GraphvizStyler):
        def __init__(self, **styler_args):
            super().__init__(**styler_args)
            self.styles[OpNode]["fillcolor"] = "orange"

    assert not is_seed_styler(Ops)


def test_styles_keeps_1_0_3s_entry_for_base_node() -> None:
    """1.0.3's ``styles`` had ``BaseNode`` (its context node's class, never drawn) beside the
    four node classes; a styler setting a font "for every class" goes through it."""

    class EveryClass(GraphvizStyler):
        def __init__(self, **styler_args):
            super().__init__(**styler_args)
            for cls in (BaseNode, TensorNode, ParamNode, OpNode, LayerNode):
                self.styles[cls]["fontcolor"] = "blue"

    styler = EveryClass(color="black")
    assert styler.styles[BaseNode]["color"] == "black"  # what every kind shares, as in 1.0.3
    assert styler.styles[BaseNode] is styler.styles[BaseNode]
    assert BaseNode not in styler.styles and styler.styles["edge"]["fontcolor"] != "blue"
    rec = torchrecorder.record(_mlp(), "net", (1, 3))
    dot = parse_dot(torchrecorder.make_dot(rec, 2, EveryClass).source)
    drawn = [attrs for name, attrs in dot.node_attrs.items() if "::" not in name]  # no titles
    assert any("Linear" in attrs["label"] for attrs in drawn)
    assert all(attrs["fontcolor"] == "blue" for attrs in drawn)
    with pytest.raises(KeyError, match="node class int"):
        styler.styles[int]


def _label_edited(edit):
    class Edited(GraphvizStyler):
        def style_node(self, node):
            z = super().style_node(node)
            z["label"] = edit(z["label"])
            return z
    return Edited


@pytest.mark.parametrize(("edit", "want"), [
    (lambda label: label.replace("\n", " "), "0 Conv2d · 20 params"),  # one line instead of two
    (lambda label: label.split("\n")[0], "0"),  # the first line only
    (lambda label: label[:8], "0\nConv2d"),  # a length cap (the newline counts, as in 1.0.3)
    (lambda label: label.upper().strip(), "0\nCONV2D · 20 PARAMS"),
])
def test_a_styler_editing_the_default_label_as_text_edits_its_text(edit, want) -> None:
    """1.0.3's labels were text (``"fc\\n4×8"``): a styler that cuts or rewrites the default label
    with string methods gets its text, drawn as a plain label, not sliced markup."""
    rec = torchrecorder.record(nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU()), "net", (1, 1, 5, 5))
    dot = parse_dot(torchrecorder.make_dot(rec, 1, _label_edited(edit)).source)
    labels = [attrs["label"].strip('"') for attrs in dot.node_attrs.values()
              if "label" in attrs and "<B>net</B>" not in attrs["label"]]  # (the title: style_cluster)
    assert want in labels, labels
    assert not any("<" in label or "TABLE" in label for label in labels), labels


class _Upper(GraphvizStyler):
    """A styler written for 1.0.3 that renames layers (1.0.3 styled clusters with ``style_node``
    too), naming no 1.0.3-only class: it draws today's picture."""

    def style_node(self, node):
        z = super().style_node(node)
        if isinstance(node, LayerNode):
            z["label"] = node.name.split("\n")[0].upper()
        return z


def test_a_layer_label_from_style_node_titles_the_layers_cluster_too() -> None:
    """A label ``style_node`` gives a layer is the layer's name in the picture whether the layer
    is drawn as a box or opened as a cluster, unless the styler has a ``style_cluster`` of its own."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.enc(x))

    rec = torchrecorder.record(Net(), "net", (1, 3))
    assert not is_seed_styler(_Upper)
    dot = parse_dot(torchrecorder.make_dot(rec, 2, _Upper).source)
    titles = sorted(attrs["label"].strip('"') for name, attrs in dot.node_attrs.items()
                    if name.endswith("::title"))
    assert titles == ["ENC", "NET"], titles  # the network and the open Sequential
    boxes = sorted(attrs["label"].strip('"') for name, attrs in dot.node_attrs.items()
                   if "::" not in name and "@" not in name)
    assert boxes == ["0", "1", "HEAD"], boxes

    class OwnClusters(_Upper):
        def style_cluster(self, node):
            return super().style_cluster(node)

    dot = parse_dot(torchrecorder.make_dot(rec, 2, OwnClusters).source)
    titles = [attrs["label"] for name, attrs in dot.node_attrs.items() if name.endswith("::title")]
    assert all("<B>" in label for label in titles), titles  # today's titles: its own choice


def test_a_default_label_formatted_into_text_titles_the_cluster_without_markup() -> None:
    class Frozen(GraphvizStyler):
        def style_node(self, node):
            z = super().style_node(node)
            if isinstance(node, LayerNode):
                z["label"] = f"{z['label']} (frozen)"
            return z

    net = nn.Sequential(nn.Sequential(nn.Linear(3, 4), nn.Tanh()), nn.Linear(4, 2))
    rec = torchrecorder.record(net, "net", (1, 3))
    dot = parse_dot(torchrecorder.make_dot(rec, 2, Frozen).source)
    titles = [attrs["label"] for name, attrs in dot.node_attrs.items() if name.endswith("::title")]
    assert titles and all(label.startswith("<") and "(frozen)" in label for label in titles), titles
    assert not any("&lt;" in label for label in titles), titles  # the markup is not shown as text


def test_input_data_as_a_list_of_positional_arguments() -> None:
    """torchinfo's and torchview's ``input_data=[x, y]`` (a list: one item per positional
    argument) records the two-input call; a model that takes one list keeps getting the list."""
    import torch

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 4), nn.Linear(5, 4)

        def forward(self, x, y, scale=1.0):
            return (self.a(x) + self.b(y)) * scale

    class Pyramid(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, features):
            return sum(self.fc(f) for f in features)

    rec = torchrecorder.record(Two(), "two", None, [torch.randn(2, 3), torch.randn(2, 5)])
    assert sorted(n.name for n in rec.nodes.values() if getattr(n, "role", None) == "input") == ["x", "y"]
    rec = torchrecorder.record(Two(), "two", None, [torch.randn(2, 3), torch.randn(2, 5)],
                               input_kwargs={"scale": 2.0})
    assert "two/mul" in rec.nodes  # the keyword argument reached forward with the two inputs
    rec = torchrecorder.record(Pyramid(), "fpn", None, [torch.randn(1, 3), torch.randn(2, 3)])
    assert [n.name for n in rec.layers()].count("fc") == 2


def test_the_manual_workflow_names_an_unnamed_network_after_its_class() -> None:
    """1.0.3's ``Recorder().register_hooks(net)`` named the network's node after its class, as
    ``add_node`` names any object it is not given a name for."""
    import torch

    from torchrecorder.recorder import Recorder

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)

    net = Tiny()
    r = Recorder()
    r.register_hooks(net)
    net(torch.randn(1, 3))
    r.remove_hooks()
    assert r.nodes[net].name == "Tiny" and r.name == "Tiny"
    named = Recorder("mine")
    named.register_hooks(net)
    net(torch.randn(1, 3))
    named.remove_hooks()
    assert named.nodes[net].name == "mine"  # a name given to the recorder is kept
    again = Recorder()
    again.register_hooks(net, name="net")
    again.remove_hooks()
    assert again.name == "net"


def test_a_later_call_in_the_1_0_3_view_shows_its_type_once() -> None:
    """In the 1.0.3 view a module below the network is named ``"0\\n(Linear)"``; the default label
    shows the type once, on its type line, for a module's second call (``0 #2``) as for its first."""
    import torch

    class Siamese(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

        def forward(self, a, b):
            return torch.cat([self.enc(a), self.enc(b)], 1)

    class Shapes(GraphvizStyler):
        def style_node(self, node):
            z = super().style_node(node)
            if isinstance(node, ParamNode):
                z["label"] = f"{node.name} {tuple(node.fn.shape)}"
            return z

    rec = torchrecorder.record(Siamese(), "siamese", [(1, 4), (1, 4)])
    dot = parse_dot(torchrecorder.make_dot(rec, 2, Shapes).source)
    labels = [attrs["label"] for attrs in dot.node_attrs.values() if "Linear" in attrs.get("label", "")]
    assert len(labels) == 2, labels
    assert not any("(Linear)" in label for label in labels), labels
    assert any("<B>0 #2</B>" in label for label in labels), labels


def test_a_list_taken_as_one_argument_that_fails_says_how_to_pass_several() -> None:
    """``input_data=[x]`` for ``forward(x)`` (torchinfo's habit) is one argument here, as a model
    taking a list needs: the error the forward raises says so and how to pass the tensor."""
    import torch

    with pytest.raises(TypeError, match="must be Tensor") as info:
        torchrecorder.record(nn.Sequential(nn.Linear(3, 2)), "net", None, [torch.randn(1, 3)])
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "input_data is a list" in notes and "input_data=(x,)" in notes, notes


def test_an_input_the_user_renamed_keeps_its_name_in_the_1_0_3_view() -> None:
    """1.0.3 named the network's input ``Input``, and a name set on the node afterwards was
    the one drawn: the 1.0.3 view keeps a name the user gave, and names the others as 1.0.3."""

    class Seed(GraphvizStyler):
        seed_view = True

    net = nn.Sequential(nn.Linear(3, 2))
    rec = torchrecorder.record(net, "n", (1, 3))
    (node,) = [n for n in rec.nodes.values() if getattr(n, "role", None) == "input"]
    source = torchrecorder.make_dot(rec, 1, Seed).source
    assert "Input" in source and "features" not in source
    node.name = "features"
    source = torchrecorder.make_dot(rec, 1, Seed).source
    assert "features" in source and ">Input<" not in source and node.name == "features"
