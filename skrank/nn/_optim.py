"""Optimisers of tables whose steps read a few rows: the label table of SNM, sparse input layers."""

import torch

from ._distributed import DistributedContext, gather, gather_uneven


class RowSparseOptimizer(torch.optim.Optimizer):
    """Adagrad, row-wise Adagrad, lazy Adam or SGD on the rows of a table that a step read, and
    no other row.

    Rows are read in either of two ways: through :meth:`gather`, which hands out rows of the
    table as a leaf tensor that records its gradient (the label table of
    :class:`~skrank.SNMClassifier`, read outside autograd; ``gather()`` reads the whole table
    in place, and the step then updates it in place), or by autograd with a sparse
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

    def gather(self, rows=None):
        """Rows ``rows`` of the table (None: the whole table, read in place, with no copy) as a
        leaf tensor whose gradient the next step applies."""
        table = self.table.detach()
        values = (table if rows is None else table[rows]).requires_grad_()
        self._reads.append((rows, values))
        return values

    def zero_grad(self, set_to_none=True):
        """Forget the rows read since the last step."""
        self._reads.clear()
        self.table.grad = None

    def _synchronizing(self):
        """Whether a step applies the reads of every process (``synchronize`` in data-parallel
        training)."""
        return self.synchronize and torch.distributed.is_initialized()

    def _read_gradients(self):
        """The rows read since the last step and their gradients, one entry per read, and
        whether they are distinct rows already (one sparse gradient summed per row). Rows None:
        the whole table, when it is the one read and the step applies no other process's reads."""
        distinct = False
        reads = [(rows, values.grad) for rows, values in self._reads if values.grad is not None]
        self._reads.clear()
        whole = len(reads) == 1 and reads[0][0] is None and self.table.grad is None
        if whole and not self._synchronizing():
            return reads, True
        if any(rows is None for rows, _ in reads):
            every_row = torch.arange(self.table.shape[0], device=self.table.device)
            reads = [(every_row if rows is None else rows, grad) for rows, grad in reads]
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
        # One read (a sparse layer's gradient, or the whole table) needs no copy.
        rows = torch.cat([rows for rows, _ in reads]) if len(reads) > 1 else reads[0][0]
        gradient = torch.cat([grad for _, grad in reads]) if len(reads) > 1 else reads[0][1]
        if self._synchronizing():
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
        read, write = _row_access(rows)
        if group.get("weight_decay"):  # absent from the state of earlier versions
            gradient = gradient + group["weight_decay"] * read(table)
        state = self.state[table]
        # Updates of the rows read: gathered copies updated in place, then written back (the
        # whole table: updated in place).
        if group["method"] == "sgd":
            if distinct and rows is not None:  # each row once: added in place
                table.index_add_(0, rows, gradient, alpha=-lr)
            else:
                write(table, read(table).sub_(gradient, alpha=lr))
        elif group["method"] == "adagrad":
            if "sum" not in state:
                state["sum"] = torch.zeros_like(table)
            total = write(state["sum"], read(state["sum"]).addcmul_(gradient, gradient))
            step = total.sqrt().add_(group["eps"]).reciprocal_().mul_(gradient)
            write(table, read(table).sub_(step, alpha=lr))
        elif group["method"] == "rowwise_adagrad":
            if "sum" not in state:
                state["sum"] = table.new_zeros(table.shape[0])
            # The mean square of each row's gradient, with no (rows, dim) temporary.
            mean_square = torch.linalg.vector_norm(gradient, dim=1).square_()
            total = read(state["sum"]).add_(mean_square.div_(gradient.shape[1]))
            total = write(state["sum"], total)
            scale = total.sqrt().add_(group["eps"]).reciprocal_().mul_(-lr)
            if rows is None:
                table.add_(gradient.mul_(scale[:, None]))
            elif distinct:  # each row once: added in place, without gathering the rows
                table.index_add_(0, rows, gradient.mul_(scale[:, None]))
            else:
                write(table, read(table).addcmul_(gradient, scale[:, None]))
        else:
            if "exp_avg" not in state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(table)
                state["exp_avg_sq"] = torch.zeros_like(table)
            state["step"] += 1
            beta1, beta2 = group["betas"]
            average = write(state["exp_avg"], read(state["exp_avg"]).lerp_(gradient, 1 - beta1))
            square = read(state["exp_avg_sq"]).mul_(beta2)
            square.addcmul_(gradient, gradient, value=1 - beta2)
            square = write(state["exp_avg_sq"], square)
            correction1 = 1 - beta1 ** state["step"]
            correction2 = 1 - beta2 ** state["step"]
            step_size = lr * correction2**0.5 / correction1
            step = average / square.sqrt().add_(group["eps"])
            write(table, read(table).sub_(step, alpha=step_size))
        return None


def _row_access(rows):
    """``(read, write)`` of the rows ``rows`` of a table: ``read(table)`` is a copy of the rows,
    ``write(table, values)`` writes them back and returns ``values``; for the whole table
    (``rows`` None), the table itself, updated in place."""
    if rows is None:
        return (lambda table: table), (lambda table, values: values)

    def write(table, values):
        table.index_copy_(0, rows, values)
        return values

    return (lambda table: table.index_select(0, rows)), write


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
