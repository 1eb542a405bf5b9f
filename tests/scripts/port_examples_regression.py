"""Mirrors pytorch/examples' regression
(https://github.com/pytorch/examples/blob/main/regression/main.py): a degree-4
polynomial learned by one nn.Linear with F.smooth_l1_loss and hand-written
updates until the loss is under 1e-3, the polynomials printed with
'{:+.2f}'.format on 0-d tensors."""
from itertools import count

import numpy as np

TOLERANCE = dict(rtol=1e-2, atol=1e-2)  # stops at a loss threshold: float32 noise moves the stop
LOOSE = {"batches": 3}


def main(torch, workdir):
    F = torch.nn.functional
    rng = np.random.default_rng(13)
    POLY_DEGREE = 4
    W_target = torch.tensor(rng.standard_normal((POLY_DEGREE, 1)), dtype=torch.float32) * 5
    b_target = torch.tensor(rng.standard_normal(1), dtype=torch.float32) * 5

    def make_features(x):
        x = x.unsqueeze(1)
        return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)

    def f(x):
        return x.mm(W_target) + b_target.item()

    def poly_desc(W, b):
        result = 'y = '
        for i, w in enumerate(W):
            result += '{:+.2f} x^{} '.format(w, i + 1)
        result += '{:+.2f}'.format(b[0])
        return result

    def get_batch(batch_size=32):
        random = torch.from_numpy(rng.standard_normal(batch_size).astype(np.float32))
        x = make_features(random)
        y = f(x)
        return x, y

    fc = torch.nn.Linear(W_target.size(0), 1)
    with torch.no_grad():
        fc.weight.copy_(torch.from_numpy(rng.uniform(-0.5, 0.5, (1, 4)).astype(np.float32)))
        fc.bias.fill_(0.1)
    for batch_idx in count(1):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        if loss < 1e-3 or batch_idx == 2000:
            break
    print('Loss: {:.6f} after {} batches'.format(loss, batch_idx))
    learned = poly_desc(fc.weight.view(-1), fc.bias)
    print('==> Learned function:\t' + learned)
    print('==> Actual function:\t' + poly_desc(W_target.view(-1), b_target))
    assert loss < 1e-3 and learned.startswith("y = ") and learned.count("x^") == 4
    return dict(batches=batch_idx, weight=fc.weight, bias=fc.bias,
                target=poly_desc(W_target.view(-1), b_target))
