"""Parameter documentation written once and inserted into the docstrings of several classes."""

import inspect
import re
import textwrap


def render_entries(entries, defaults=None, indent=4):
    """numpydoc entries ``name : type, default=...`` with their descriptions.

    Parameters
    ----------
    entries : dict of str to (str, str)
        Each name's type and description (descriptions are wrapped at 96 columns).
    defaults : dict of str to object or None, default=None
        Each name's default, rendered with ``repr``; names without one get no default.
    indent : int, default=4
        Indentation of the entry lines (descriptions get four more).

    Returns
    -------
    text : str
    """
    defaults = defaults or {}
    lines = []
    for name, (kind, description) in entries.items():
        head = f"{name} : {kind}"
        if name in defaults:
            default = defaults[name]
            shown = f'"{default}"' if isinstance(default, str) else repr(default)
            head += f", default={shown}"
        lines.append(" " * indent + head)
        if not description:
            continue
        body = textwrap.fill(
            description,
            width=100,
            initial_indent=" " * (indent + 4),
            subsequent_indent=" " * (indent + 4),
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines.append(body)
    return "\n".join(lines)


def fill_shared_docs(parameters=None, attributes=None, methods=None):
    """Class decorator: replace the marker lines ``{shared_parameters}`` and
    ``{shared_attributes}`` of the class docstring by the rendered entries (and
    ``{component_parameters}`` by those of the class's ``component_parameters``, a
    :class:`~skrank.nn.ComponentParameters`), and the marker lines of its methods'
    docstrings by the entries ``methods`` (as :func:`fill_docs` does).

    Parameter defaults are read from the class's ``__init__`` signature (for the methods, from
    each method's signature), so the documented default is always the actual one.
    """

    def decorate(cls):
        if methods is not None:
            for attribute in vars(cls).values():
                function = getattr(attribute, "__func__", attribute)  # a classmethod's function
                if inspect.isfunction(function) and _MARKER.search(function.__doc__ or ""):
                    fill_docs(methods)(function)
        doc = cls.__doc__
        if doc is None:  # python -OO
            return cls
        signature = inspect.signature(cls.__init__).parameters

        def render_parameters(entries):
            defaults = {
                name: signature[name].default
                for name in entries
                if name in signature and signature[name].default is not inspect.Parameter.empty
            }
            missing = [name for name in entries if name not in signature]
            if missing:
                raise TypeError(f"{cls.__name__}.__init__ lacks the shared parameters {missing}.")
            return render_entries(entries, defaults)

        if parameters is not None:
            doc = doc.replace("    {shared_parameters}", render_parameters(parameters))
        component = getattr(cls, "component_parameters", None)
        if component is not None:
            doc = doc.replace("    {component_parameters}", render_parameters(component.docs))
        if attributes is not None:
            doc = doc.replace("    {shared_attributes}", render_entries(attributes))
        cls.__doc__ = doc
        return cls

    return decorate


_MARKER = re.compile(r"^( *)\{(\w+)\}$", re.MULTILINE)


def fill_docs(entries):
    """Function decorator: replace each marker line ``{key}`` of the docstring by the entry
    ``entries[key]``, rendered at the marker's indentation.

    Parameters
    ----------
    entries : dict of str to (str, str, str), list of them, dict of them, or str
        For each marker key, the parameter's name, its type and its description (or a list of
        such entries, rendered in order). Defaults are read from the decorated function's
        signature. A dict maps numpydoc section headings (``"Parameters"``, ``"Returns"``, ...)
        to lists of entries: the marker becomes those whole sections (an empty description
        renders the name and type alone). A str is a block of docstring text, inserted at the
        marker's indentation.

    Returns
    -------
    decorate : callable
    """

    def decorate(function):
        signature = inspect.signature(function).parameters

        def render_group(group, indent):
            group = group if isinstance(group, list) else [group]
            rendered, defaults = {}, {}
            for name, kind, description in group:
                rendered[name] = (kind, description)
                parameter = signature.get(name.lstrip("*"))
                if parameter is not None and parameter.default is not inspect.Parameter.empty:
                    defaults[name] = parameter.default
            return render_entries(rendered, defaults, indent=len(indent))

        def render(match):
            indent, key = match.groups()
            entry = entries[key]
            if isinstance(entry, str):
                return textwrap.indent(textwrap.dedent(entry).strip("\n"), indent)
            if isinstance(entry, dict):
                return "\n\n".join(
                    f"{indent}{heading}\n{indent}{'-' * len(heading)}\n"
                    + render_group(group, indent)
                    for heading, group in entry.items()
                )
            return render_group(entry, indent)

        if function.__doc__ is not None:  # None under python -OO
            function.__doc__ = _MARKER.sub(render, function.__doc__)
        return function

    return decorate
