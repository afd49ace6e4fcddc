"""unit_rows: torch.nn.functional.normalize with a short backward pass."""

import torch

from skrank.utils._unit_rows import unit_rows


def test_unit_rows_is_normalize_with_its_gradient():
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(7, 4, dtype=torch.float64, generator=generator)
    rows[2] = 0.0  # a zero row: divided by 1e-12, as normalize does
    ours, reference = rows.clone().requires_grad_(), rows.clone().requires_grad_()
    assert torch.autograd.gradcheck(unit_rows, (rows[[0, 1, 3, 4]].clone().requires_grad_(),))
    torch.testing.assert_close(unit_rows(ours), torch.nn.functional.normalize(reference, dim=1))
    weights = torch.randn(7, 4, dtype=torch.float64, generator=generator)
    (unit_rows(ours) * weights).sum().backward()
    (torch.nn.functional.normalize(reference, dim=1) * weights).sum().backward()
    torch.testing.assert_close(ours.grad, reference.grad)
    with torch.no_grad():
        torch.testing.assert_close(unit_rows(ours), torch.nn.functional.normalize(rows, dim=1))
