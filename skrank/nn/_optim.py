"""Optimisers of tables whose steps read a few rows: the label table of SNM, sparse input layers."""

import torch

from ._distributed import DistributedContext, gather, gather_uneven


class RowSparseOptimizer(torch.optim.Optimizer):
    """Adagrad, row-wise Adagrad, lazy Adam or SGD on the rows of a table that a step read, and
    no other row.

    Rows are read in either of two ways: through :meth:`gather`, which hands out rows of the
    table as a leaf tensor that records its gradient (the label table of
    :class:`~skrank.SNMClassifier`, read outside autograd), or by autograd with a sparse
    gradient (:class:`~skrank.nn.SparseLinear`, an embedding with ``sparse=True``: the
    gradient holds one row per read, uncoalesced). :meth:`step` then updates those rows only
    (rows read several times get the sum of their gradients, once), so a step costs
    ``O(rows read x dim)`` whatever the size of the table, with fixed-shape tensor operations
    only: no host synchronisation on a GPU, unlike the coalescing of torch's sparse
    optimisers, which reads sizes back. The updates are those of :class:`torch.optim.Adagrad`
    (``eps=1e-10``), :class:`torch.optim.SparseAdam` (one step count for the table; moments of
    unread rows untouched) and plain SGD (no momentum: a momentum buffer would have to decay
    every row it ever touched). Row-wise Adagrad is Adagrad with one accumulator a row, the sum
    of the mean squared gradient of that row over the steps (the rule of large embedding tables
    in recommender systems, e.g. DLRM's): its state takes one number a row instead of one a
    coordinate (Adam keeps two), and a step reads and writes the table's rows once.

    A ``torch.optim.Optimizer``: learning-rate schedulers and ``state_dict`` work as usual.

    Parameters
    ----------
    table : torch.nn.Parameter of shape (n_rows, dim)
        The table (e.g. ``LabelEmbeddingNetwork.label_embeddings.weight``, or the weight of a
        :class:`~skrank.nn.SparseLinear`).
    method : {"adagrad", "rowwise_adagrad", "sparse_adam", "sgd"}, default="adagrad"
        The update rule.
    lr : float, default=0.05
        Learning rate.
    weight_decay : float, default=0.0
        L2 penalty, added to the gradient of the rows a step read (lazily: rows not read are
        not decayed).
    synchronize : bool, default=False
        In data-parallel training (``torch.distributed`` initialised), gather the rows read and
        their gradients from every process and apply them all, averaged over the processes, so
        that every process holds the same table (as DistributedDataParallel averages the
        gradients of the other parameters).

    Examples
    --------
    >>> import torch
    >>> from skrank.nn import RowSparseOptimizer
    >>> table = torch.nn.Parameter(torch.ones(1000, 4))
    >>> optimizer = RowSparseOptimizer(table, method="sgd", lr=0.5)
    >>> rows = optimizer.gather(torch.tensor([3, 7, 3]))
    >>> rows.sum().backward()
    >>> optimizer.step()
    >>> table[3, 0].item(), table[7, 0].item(), table[0, 0].item()
    (0.0, 0.5, 1.0)
    """

    _METHODS = ("adagrad", "rowwise_adagrad", "sparse_adam", "sgd")

    def __init__(self, table, *, method="adagrad", lr=0.05, weight_decay=0.0, synchronize=False):
        if method not in self._METHODS:
            raise ValueError(f"method must be one of {list(self._METHODS)}, got {method!r}.")
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr!r}.")
        if not weight_decay >= 0:
            raise ValueError(f"weight_decay must be non-negative, got {weight_decay!r}.")
        eps = 1e-10 if method in ("adagrad", "rowwise_adagrad") else 1e-8
        defaults = {
            "lr": lr,
            "method": method,
            "eps": eps,
            "betas": (0.9, 0.999),
            "weight_decay": weight_decay,
        }
        super().__init__([table], defaults)
        self._reads = []
        self.synchronize = synchronize

    @property
    def table(self):
        """The table being optimised."""
        return self.param_groups[0]["params"][0]

    def gather(self, rows):
        """Rows ``rows`` of the table as a leaf tensor whose gradient the next step applies."""
        values = self.table.detach()[rows].requires_grad_()
        self._reads.append((rows, values))
        return values

    def zero_grad(self, set_to_none=True):
        """Forget the rows read since the last step."""
        self._reads.clear()
        self.table.grad = None

    def _read_gradients(self):
        """The rows read since the last step and their gradients, one entry per read, and
        whether they are distinct rows already (one sparse gradient summed per row)."""
        distinct = False
        reads = [(rows, values.grad) for rows, values in self._reads if values.grad is not None]
        self._reads.clear()
        gradient = self.table.grad
        if gradient is not None:
            if not gradient.is_sparse:
                raise RuntimeError(
                    "RowSparseOptimizer updates the rows read by a step: the table's gradient "
                    "must be sparse (an embedding with sparse=True, or rows read by gather)."
                )
            # Uncoalesced (one row per read; coalescing would read its size back to the host)
            # unless the layer summed the rows itself. Autograd's accumulation drops the
            # coalesced flag of SparseLinear's sums per feature: on the CPU, where a check
            # costs no transfer, increasing rows show them.
            indices = gradient._indices()[0]
            reads.append((indices, gradient._values()))
            distinct = len(reads) == 1 and (
                gradient.is_coalesced()
                or (
                    indices.device.type in _DISTINCT_ROW_DEVICES
                    and bool((indices[1:] > indices[:-1]).all())
                )
            )
            self.table.grad = None
        return reads, distinct

    @torch.no_grad()
    def step(self, closure=None):
        """Update the rows read since the last step with their gradients."""
        reads, distinct = self._read_gradients()
        if not reads:
            return None
        # One read (a sparse layer's gradient) needs no copy.
        rows = torch.cat([rows for rows, _ in reads]) if len(reads) > 1 else reads[0][0]
        gradient = torch.cat([grad for _, grad in reads]) if len(reads) > 1 else reads[0][1]
        if self.synchronize and torch.distributed.is_initialized():
            world = torch.distributed.get_world_size()
            context = DistributedContext(torch.distributed.get_rank(), world)
            # Reads of fixed shapes gather as they are; on the CPU (the flat layout of sparse
            # rows) the number of rows read differs between the ranks.
            collect = gather_uneven if rows.device.type in _DISTINCT_ROW_DEVICES else gather
            rows, gradient = collect(rows, context), collect(gradient, context) / world
            distinct = False  # the ranks read rows in common
        group = self.param_groups[0]
        if not distinct:
            rows, gradient = _summed_per_row(rows, gradient)
            distinct = rows.device.type in _DISTINCT_ROW_DEVICES
        table, lr = self.table, group["lr"]
        if group.get("weight_decay"):  # absent from the state of earlier versions
            gradient = gradient + group["weight_decay"] * table.index_select(0, rows)
        state = self.state[table]
        # Updates of the rows read: gathered copies updated in place, then written back.
        if group["method"] == "sgd":
            table.index_copy_(0, rows, table.index_select(0, rows).sub_(gradient, alpha=lr))
        elif group["method"] == "adagrad":
            if "sum" not in state:
                state["sum"] = torch.zeros_like(table)
            total = state["sum"].index_select(0, rows).addcmul_(gradient, gradient)
            state["sum"].index_copy_(0, rows, total)
            step = total.sqrt_().add_(group["eps"]).reciprocal_().mul_(gradient)
            table.index_copy_(0, rows, table.index_select(0, rows).sub_(step, alpha=lr))
        elif group["method"] == "rowwise_adagrad":
            if "sum" not in state:
                state["sum"] = table.new_zeros(table.shape[0])
            # The mean square of each row's gradient, with no (rows, dim) temporary.
            mean_square = torch.linalg.vector_norm(gradient, dim=1).square_()
            total = state["sum"].index_select(0, rows).add_(mean_square.div_(gradient.shape[1]))
            state["sum"].index_copy_(0, rows, total)
            scale = total.sqrt_().add_(group["eps"]).reciprocal_().mul_(-lr)
            if distinct:  # each row once: added in place, without gathering the rows
                table.index_add_(0, rows, gradient.mul_(scale[:, None]))
            else:
                updated = table.index_select(0, rows).addcmul_(gradient, scale[:, None])
                table.index_copy_(0, rows, updated)
        else:
            if "exp_avg" not in state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(table)
                state["exp_avg_sq"] = torch.zeros_like(table)
            state["step"] += 1
            beta1, beta2 = group["betas"]
            average = state["exp_avg"].index_select(0, rows).lerp_(gradient, 1 - beta1)
            square = (
                state["exp_avg_sq"]
                .index_select(0, rows)
                .mul_(beta2)
                .addcmul_(gradient, gradient, value=1 - beta2)
            )
            state["exp_avg"].index_copy_(0, rows, average)
            state["exp_avg_sq"].index_copy_(0, rows, square)
            correction1 = 1 - beta1 ** state["step"]
            correction2 = 1 - beta2 ** state["step"]
            step_size = lr * correction2**0.5 / correction1
            step = average.div_(square.sqrt_().add_(group["eps"]))
            table.index_copy_(0, rows, table.index_select(0, rows).sub_(step, alpha=step_size))
        return None


# Devices where a step updates the distinct rows it read (torch.unique reads a size back to the
# host, which costs nothing on the CPU); elsewhere it keeps fixed shapes.
_DISTINCT_ROW_DEVICES = {"cpu"}


def _summed_per_row(rows, gradients):
    """Each read row with the sum of the gradients of all reads of that row.

    On the CPU, the distinct rows and their sums (far fewer rows to update when rows repeat,
    as the features of a batch of sparse rows do). Elsewhere, fixed shapes with no read back to
    the host: one entry per read, repeated rows given the same sum.
    """
    if rows.device.type in _DISTINCT_ROW_DEVICES:
        distinct, segment = torch.unique(rows, return_inverse=True)
        sums = gradients.new_zeros((distinct.shape[0], gradients.shape[1]))
        return distinct, sums.index_add_(0, segment, gradients)
    rows, order = torch.sort(rows)
    new_row = torch.ones_like(rows, dtype=torch.bool)
    new_row[1:] = rows[1:] != rows[:-1]
    segment = torch.cumsum(new_row, 0) - 1
    sums = torch.zeros_like(gradients).index_add_(0, segment, gradients[order])
    # Repeated rows get the same sum, so their (identical) updates may land in any order.
    return rows, sums[segment]
