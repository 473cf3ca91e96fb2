"""Zoo models that stress the size of a drawing and Python loops in ``forward``.

Each is drawn by default within the drawing budget (``tests/test_zoo_budget.py``):
its loops fold (``×N``), or its depth is lowered, and a note says so.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from . import Case

__all__ = ["CASES", "DartsSupernet", "FarthestPointSampling", "PointNet2", "SeriesDecoder", "Transformer48",
           "YoloStyle"]


def _x(*shape: int, seed: int = 0) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


class FarthestPointSampling(nn.Module):
    """PointNet++-style set abstraction: farthest-point sampling of ``npoint`` centroids in a
    Python loop (``setitem, sub, pow, sum, lt, max`` per iteration), then a shared MLP over
    the sampled points and a max pool."""

    def __init__(self, npoint: int = 1000) -> None:
        super().__init__()
        self.npoint = npoint
        self.mlp = nn.Sequential(nn.Conv1d(3, 16, 1), nn.BatchNorm1d(16), nn.ReLU(), nn.Conv1d(16, 32, 1))
        self.head = nn.Linear(32, 4)

    def forward(self, xyz: Tensor) -> Tensor:
        b, n, _ = xyz.shape
        centroids = torch.zeros(b, self.npoint, dtype=torch.long)
        distance = torch.ones(b, n) * 1e10
        farthest = torch.zeros(b, dtype=torch.long)
        batch = torch.arange(b)
        for i in range(self.npoint):
            centroids[:, i] = farthest
            centroid = xyz[batch, farthest, :].view(b, 1, 3)
            dist = torch.sum((xyz - centroid) ** 2, -1)
            mask = dist < distance
            distance[mask] = dist[mask]
            farthest = torch.max(distance, -1)[1]
        points = xyz[batch[:, None], centroids]
        features = self.mlp(points.transpose(1, 2))
        return self.head(features.max(dim=-1)[0])


def _square_distance(src: Tensor, dst: Tensor) -> Tensor:
    dist = -2 * torch.matmul(src, dst.permute(0, 2, 1))
    dist = dist + torch.sum(src ** 2, -1).unsqueeze(-1)
    return dist + torch.sum(dst ** 2, -1).unsqueeze(1)


def _index_points(points: Tensor, idx: Tensor) -> Tensor:
    b = points.shape[0]
    view = [b] + [1] * (idx.dim() - 1)
    repeat = [1, *idx.shape[1:]]
    batch = torch.arange(b, dtype=torch.long).view(view).repeat(repeat)
    return points[batch, idx, :]


def _farthest_point_sample(xyz: Tensor, npoint: int) -> Tensor:
    b, n, _ = xyz.shape
    centroids = torch.zeros(b, npoint, dtype=torch.long)
    distance = torch.ones(b, n) * 1e10
    farthest = torch.zeros(b, dtype=torch.long)
    batch = torch.arange(b, dtype=torch.long)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch, farthest, :].view(b, 1, 3)
        dist = torch.sum((xyz - centroid) ** 2, -1)
        mask = dist < distance
        distance[mask] = dist[mask]
        farthest = torch.max(distance, -1)[1]
    return centroids


def _query_ball_point(radius: float, nsample: int, xyz: Tensor, new_xyz: Tensor) -> Tensor:
    b, n, _ = xyz.shape
    s = new_xyz.shape[1]
    group_idx = torch.arange(n, dtype=torch.long).view(1, 1, n).repeat([b, s, 1])
    sqrdists = _square_distance(new_xyz, xyz)
    group_idx[sqrdists > radius ** 2] = n
    group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
    group_first = group_idx[:, :, 0].view(b, s, 1).repeat([1, 1, nsample])
    mask = group_idx == n
    group_idx[mask] = group_first[mask]
    return group_idx


class _SetAbstraction(nn.Module):
    """Sample ``npoint`` centroids, group the points within ``radius`` of each (at most
    ``nsample``), run a shared MLP over every group and max-pool it (or group everything)."""

    def __init__(self, npoint: int, radius: float, nsample: int, cin: int, mlp: list[int],
                 group_all: bool = False) -> None:
        super().__init__()
        self.npoint, self.radius, self.nsample, self.group_all = npoint, radius, nsample, group_all
        self.convs = nn.ModuleList()
        self.bns = nn.ModuleList()
        last = cin
        for c in mlp:
            self.convs.append(nn.Conv2d(last, c, 1))
            self.bns.append(nn.BatchNorm2d(c))
            last = c

    def forward(self, xyz: Tensor, points: Optional[Tensor]) -> tuple[Tensor, Tensor]:
        xyz = xyz.permute(0, 2, 1)
        if points is not None:
            points = points.permute(0, 2, 1)
        b, n, c = xyz.shape
        if self.group_all:
            new_xyz = torch.zeros(b, 1, c)
            grouped = xyz.view(b, 1, n, c)
            if points is not None:
                grouped = torch.cat([grouped, points.view(b, 1, n, -1)], dim=-1)
        else:
            fps_idx = _farthest_point_sample(xyz, self.npoint)
            new_xyz = _index_points(xyz, fps_idx)
            idx = _query_ball_point(self.radius, self.nsample, xyz, new_xyz)
            grouped_xyz = _index_points(xyz, idx)
            grouped_norm = grouped_xyz - new_xyz.view(b, self.npoint, 1, c)
            grouped = (torch.cat([grouped_norm, _index_points(points, idx)], dim=-1)
                       if points is not None else grouped_norm)
        new_points = grouped.permute(0, 3, 2, 1)
        for conv, bn in zip(self.convs, self.bns, strict=True):
            new_points = torch.relu(bn(conv(new_points)))
        new_points = torch.max(new_points, 2)[0]
        return new_xyz.permute(0, 2, 1), new_points


class _FeaturePropagation(nn.Module):
    """Interpolate the coarse features at the fine points (inverse distance to the 3 nearest),
    concatenate the skip features, shared MLP."""

    def __init__(self, cin: int, mlp: list[int]) -> None:
        super().__init__()
        self.convs = nn.ModuleList()
        self.bns = nn.ModuleList()
        last = cin
        for c in mlp:
            self.convs.append(nn.Conv1d(last, c, 1))
            self.bns.append(nn.BatchNorm1d(c))
            last = c

    def forward(self, xyz1: Tensor, xyz2: Tensor, points1: Optional[Tensor], points2: Tensor) -> Tensor:
        xyz1, xyz2 = xyz1.permute(0, 2, 1), xyz2.permute(0, 2, 1)
        points2 = points2.permute(0, 2, 1)
        b, n, _ = xyz1.shape
        s = xyz2.shape[1]
        if s == 1:
            interpolated = points2.repeat(1, n, 1)
        else:
            dists = _square_distance(xyz1, xyz2)
            dists, idx = dists.sort(dim=-1)
            dists, idx = dists[:, :, :3], idx[:, :, :3]
            recip = 1.0 / (dists + 1e-8)
            weight = recip / torch.sum(recip, dim=2, keepdim=True)
            interpolated = torch.sum(_index_points(points2, idx) * weight.view(b, n, 3, 1), dim=2)
        if points1 is not None:
            new_points = torch.cat([points1.permute(0, 2, 1), interpolated], dim=-1)
        else:
            new_points = interpolated
        new_points = new_points.permute(0, 2, 1)
        for conv, bn in zip(self.convs, self.bns, strict=True):
            new_points = torch.relu(bn(conv(new_points)))
        return new_points


class PointNet2(nn.Module):
    """A PointNet++ segmentation network (SSG): four set abstractions (farthest-point sampling,
    ball-query grouping through gathers and index writes, shared MLPs), four feature
    propagations.  Few boxes, but many values read far below where they are made and many
    labelled edges: ``dot`` took 20 s for its 200-box default drawing before the budget
    counted the layout's virtual nodes."""

    def __init__(self, classes: int = 4, w: int = 8) -> None:
        super().__init__()
        self.sa1 = _SetAbstraction(32, 0.2, 8, 6 + 3, [w, w, 2 * w])
        self.sa2 = _SetAbstraction(16, 0.4, 8, 2 * w + 3, [2 * w, 2 * w, 4 * w])
        self.sa3 = _SetAbstraction(8, 0.6, 4, 4 * w + 3, [4 * w, 4 * w, 8 * w])
        self.sa4 = _SetAbstraction(1, 0.0, 0, 8 * w + 3, [8 * w, 8 * w], group_all=True)
        self.fp4 = _FeaturePropagation(16 * w, [4 * w, 4 * w])
        self.fp3 = _FeaturePropagation(8 * w, [4 * w, 2 * w])
        self.fp2 = _FeaturePropagation(2 * w + 2 * w, [2 * w, 2 * w])
        self.fp1 = _FeaturePropagation(2 * w + 3, [2 * w, 2 * w])
        self.conv = nn.Conv1d(2 * w, classes, 1)

    def forward(self, xyz: Tensor) -> Tensor:
        l0_points, l0_xyz = xyz, xyz[:, :3, :]
        l1_xyz, l1_points = self.sa1(l0_xyz, l0_points)
        l2_xyz, l2_points = self.sa2(l1_xyz, l1_points)
        l3_xyz, l3_points = self.sa3(l2_xyz, l2_points)
        l4_xyz, l4_points = self.sa4(l3_xyz, l3_points)
        l3_points = self.fp4(l3_xyz, l4_xyz, l3_points, l4_points)
        l2_points = self.fp3(l2_xyz, l3_xyz, l2_points, l3_points)
        l1_points = self.fp2(l1_xyz, l2_xyz, l1_points, l2_points)
        l0_points = self.fp1(l0_xyz, l1_xyz, l0_xyz, l1_points)
        return torch.log_softmax(self.conv(l0_points), dim=1)


class SeriesDecoder(nn.Module):
    """A decoder that evaluates a power series in a Python loop at the top level of ``forward``
    (``mul, add, pow`` per term)."""

    def __init__(self, terms: int = 1000, d: int = 8) -> None:
        super().__init__()
        self.terms = terms
        self.proj = nn.Linear(d, d)
        self.out = nn.Linear(d, 2)

    def forward(self, z: Tensor) -> Tensor:
        h = torch.tanh(self.proj(z)) * 0.5
        acc = torch.zeros_like(h)
        for k in range(self.terms):
            acc = acc + (h * (1.0 / (k + 1))).pow(2)
        return self.out(acc)


class _SepConv(nn.Sequential):
    def __init__(self, c: int, k: int, dilation: int = 1) -> None:
        pad = dilation * (k - 1) // 2
        super().__init__(nn.ReLU(), nn.Conv2d(c, c, k, padding=pad, dilation=dilation, groups=c, bias=False),
                         nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c))


class _Zero(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x * 0.0


class _MixedOp(nn.Module):
    """Every DARTS candidate operation on one edge, summed with softmax weights."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.ops = nn.ModuleList([
            _Zero(), nn.Identity(), nn.MaxPool2d(3, 1, 1), nn.AvgPool2d(3, 1, 1),
            _SepConv(c, 3), _SepConv(c, 5), _SepConv(c, 3, dilation=2), _SepConv(c, 5, dilation=2),
        ])

    def forward(self, x: Tensor, weights: Tensor) -> Tensor:
        return sum(w * op(x) for w, op in zip(weights, self.ops, strict=True))  # type: ignore[return-value]


class _Cell(nn.Module):
    def __init__(self, c: int, steps: int = 4) -> None:
        super().__init__()
        self.steps = steps
        self.pre0 = nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c))
        self.pre1 = nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c))
        self.edges = nn.ModuleList(_MixedOp(c) for i in range(steps) for _ in range(2 + i))

    def forward(self, s0: Tensor, s1: Tensor, alphas: Tensor) -> Tensor:
        states = [self.pre0(s0), self.pre1(s1)]
        offset = 0
        for _ in range(self.steps):
            s = sum(self.edges[offset + j](h, alphas[offset + j]) for j, h in enumerate(states))
            offset += len(states)
            states.append(s)  # type: ignore[arg-type]
        return torch.cat(states[-self.steps:], dim=1)


class DartsSupernet(nn.Module):
    """A DARTS-style supernet: cells whose every edge runs all eight candidate operations."""

    def __init__(self, c: int = 4, cells: int = 2) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.cells = nn.ModuleList()
        self.reduce = nn.ModuleList()
        for _ in range(cells):
            self.cells.append(_Cell(c))
            self.reduce.append(nn.Conv2d(4 * c, c, 1))
        self.alphas = nn.Parameter(torch.zeros(14, 8))
        self.head = nn.Linear(c, 10)

    def forward(self, x: Tensor) -> Tensor:
        s0 = s1 = self.stem(x)
        weights = torch.softmax(self.alphas, dim=-1)
        for cell, reduce in zip(self.cells, self.reduce, strict=True):
            s0, s1 = s1, reduce(cell(s0, s1, weights))
        return self.head(s1.mean(dim=(2, 3)))


class _ConvBnAct(nn.Sequential):
    def __init__(self, a: int, b: int, k: int = 1, s: int = 1) -> None:
        super().__init__(nn.Conv2d(a, b, k, s, k // 2, bias=False), nn.BatchNorm2d(b), nn.SiLU())


class _Bottleneck(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.cv1 = _ConvBnAct(c, c, 3)
        self.cv2 = _ConvBnAct(c, c, 3)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.cv2(self.cv1(x))


class _C2f(nn.Module):
    """Split, a chain of bottlenecks each kept, concatenated (YOLOv8's C2f, ELAN-like)."""

    def __init__(self, a: int, b: int, n: int) -> None:
        super().__init__()
        self.c = b // 2
        self.cv1 = _ConvBnAct(a, 2 * self.c)
        self.m = nn.ModuleList(_Bottleneck(self.c) for _ in range(n))
        self.cv2 = _ConvBnAct((2 + n) * self.c, b)

    def forward(self, x: Tensor) -> Tensor:
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class _SPPF(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.cv1 = _ConvBnAct(c, c // 2)
        self.pool = nn.MaxPool2d(5, 1, 2)
        self.cv2 = _ConvBnAct(c * 2, c)

    def forward(self, x: Tensor) -> Tensor:
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))


class YoloStyle(nn.Module):
    """A YOLO-style detector: a C2f backbone with SPPF, an FPN/PAN neck (upsample, concat) and
    three detection heads."""

    def __init__(self, w: int = 8, n: int = 2, classes: int = 4) -> None:
        super().__init__()
        self.stem = _ConvBnAct(3, w, 3, 2)
        self.stages = nn.ModuleList([
            nn.Sequential(_ConvBnAct(w, 2 * w, 3, 2), _C2f(2 * w, 2 * w, n)),
            nn.Sequential(_ConvBnAct(2 * w, 4 * w, 3, 2), _C2f(4 * w, 4 * w, 2 * n)),
            nn.Sequential(_ConvBnAct(4 * w, 8 * w, 3, 2), _C2f(8 * w, 8 * w, 2 * n)),
            nn.Sequential(_ConvBnAct(8 * w, 8 * w, 3, 2), _C2f(8 * w, 8 * w, n), _SPPF(8 * w)),
        ])
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.top1 = _C2f(16 * w, 8 * w, n)
        self.top2 = _C2f(12 * w, 4 * w, n)
        self.down1 = _ConvBnAct(4 * w, 4 * w, 3, 2)
        self.bot1 = _C2f(12 * w, 8 * w, n)
        self.down2 = _ConvBnAct(8 * w, 8 * w, 3, 2)
        self.bot2 = _C2f(16 * w, 8 * w, n)
        self.heads = nn.ModuleList(nn.Sequential(_ConvBnAct(c, c, 3), nn.Conv2d(c, 5 + classes, 1))
                                   for c in (4 * w, 8 * w, 8 * w))

    def forward(self, x: Tensor) -> list[Tensor]:
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        p3, p4, p5 = feats[1], feats[2], feats[3]
        t4 = self.top1(torch.cat([self.up(p5), p4], 1))
        t3 = self.top2(torch.cat([self.up(t4), p3], 1))
        b4 = self.bot1(torch.cat([self.down1(t3), t4], 1))
        b5 = self.bot2(torch.cat([self.down2(b4), p5], 1))
        return [head(f) for head, f in zip(self.heads, (t3, b4, b5), strict=True)]


class _DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        scale = (d // self.heads) ** 0.5
        att = torch.softmax(q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2) / scale, dim=-1)
        y = (att @ v.transpose(1, 2)).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.norm2(x))


class Transformer48(nn.Module):
    """A 48-layer transformer decoder (attention written out), drawn at full depth."""

    def __init__(self, layers: int = 48, d: int = 16, heads: int = 2, vocab: int = 50) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, 8, d))
        self.layers = nn.ModuleList(_DecoderLayer(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.embed(ids) + self.pos[:, : ids.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def _ids() -> Tensor:
    return torch.randint(1, 50, (1, 8), generator=torch.Generator().manual_seed(0))


def _seeded(cls: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls().eval()


CASES: list[Case] = [
    Case(name="FarthestPointSampling", build=lambda: _seeded(FarthestPointSampling),
         inputs=lambda: ((_x(1, 1024, 3),), {})),
    Case(name="PointNet2", build=lambda: _seeded(PointNet2), inputs=lambda: ((_x(1, 6, 64),), {})),
    Case(name="SeriesDecoder", build=lambda: _seeded(SeriesDecoder), inputs=lambda: ((_x(2, 8),), {})),
    Case(name="DartsSupernet", build=lambda: _seeded(DartsSupernet), inputs=lambda: ((_x(1, 3, 8, 8),), {})),
    Case(name="YoloStyle", build=lambda: _seeded(YoloStyle), inputs=lambda: ((_x(1, 3, 64, 64),), {})),
    Case(name="Transformer48", build=lambda: _seeded(Transformer48), inputs=lambda: ((_ids(),), {})),
]
