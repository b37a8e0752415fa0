"""Recursive-descent parser: DSL tokens -> Graph IR (openinfer.ir.nodes).

It accepts what the newest original parser accepts (digest §2), with its lenient commas (a comma
between list items is optional and a trailing one is fine, except in yield/await), plus the forms
decisions.md adds: `dep after(X) before(Y)` with op names and dotted node kinds, `acc=i32` next
to `acc=[f32, f32]`, `-inf`. It also makes the checks the original made while expanding the macro
(dtype names, `@init` literal types and ranges, `to=`/`acc=` values, duplicate settings) and two
it did not: duplicate variable and duplicate block names are errors.

Nodes are numbered as the original numbers them: in text order, except that a loop takes the
next index *after* its body. Every error is a DslError pointing at the offending token.
"""

from __future__ import annotations

from ..dtypes import DTypeInfo, is_dtype_name, lookup
from ..errors import DslError
from ..ir.describe import describe as describe_node
from ..ir.describe import node_uuid
from ..ir.nodes import (
    Assign,
    Attr,
    AttrBool,
    AttrDimList,
    AttrDouble,
    AttrDType,
    AttrDTypeList,
    AttrInt,
    AttrIntList,
    AttrStr,
    AttrValue,
    AttrVar,
    Await,
    Barrier,
    Block,
    Branch,
    CacheAccess,
    CacheDecrement,
    CacheIncrement,
    CacheIndex,
    CacheRead,
    CacheReset,
    CacheSingle,
    CacheSlice,
    CacheWrite,
    Dep,
    Graph,
    InitValue,
    Loop,
    MemoryKind,
    Node,
    Op,
    Return,
    Transfer,
    VarDecl,
    VarRef,
    Yield,
)
from . import hints
from .lexer import (
    END,
    EOF,
    FLOAT,
    IDENT,
    INT,
    KIND,
    KW,
    PUNCT,
    START,
    STR,
    TEXT,
    U64_MAX,
    VALUE,
    Source,
    Token,
    tokenize,
)
from .literals import InitRuleError, init_value

I64_MAX = (1 << 63) - 1
#: Loops nested deeper than this are refused (it bounds recursion in every later stage too).
MAX_LOOP_DEPTH = 64

_SECTION_KINDS = {k.section: k for k in MemoryKind}
_FULL_SLICE = CacheSlice(None, None)
#: Node kinds written as keywords, accepted as `dep` targets next to identifiers and `cache.write`.
_KEYWORD_NODE_KINDS = ("loop", "yield", "await", "return")
_NODE_LIST = ("assign, op, cache.read/write/increment/decrement/reset, branch, barrier, dep, loop, "
              "yield, await, transfer, return")


def parse(text: str, source_name: str = "<string>") -> Graph:
    """Parse DSL text (the body of `graph! { ... }`) into a Graph."""
    return parse_source(Source(text, source_name))


def parse_source(src: Source, start: int = 0, end: int | None = None) -> Graph:
    """Parse `src.text[start:end]`; positions in errors and in the IR refer to the whole text."""
    return _Parser(src, tokenize(src, start, end)).graph()


class _Parser:
    def __init__(self, src: Source, tokens: list[Token]):
        self.src = src
        self.toks = tokens + tokens[-1:]  # a second EOF, so that peek() at the end needs no check
        self.pos = 0
        self.vars: dict[str, VarDecl] = {}
        self.blocks: dict[str, Block] = {}
        self.next_index = 0
        self.loop_depth = 0

    # ------------------------------------------------------------------ token helpers

    @property
    def tok(self) -> Token:
        return self.toks[self.pos]

    def peek(self) -> Token:
        return self.toks[self.pos + 1]

    def advance(self) -> Token:
        tok = self.toks[self.pos]
        if tok[KIND] != EOF:
            self.pos += 1
        return tok

    def at(self, text: str) -> bool:
        """The current token is the punctuation or word `text`. Comparing the text is enough:
        a literal's text can never equal a punctuation or word (strings keep their quotes)."""
        return self.toks[self.pos][TEXT] == text

    def accept(self, text: str) -> bool:
        if self.toks[self.pos][TEXT] == text:
            self.pos += 1
            return True
        return False

    def error(self, tok: Token, message: str, hint: str | None = None, end: int | None = None) -> DslError:
        if tok[KIND] == EOF and self.pos > 0:  # point just after the last token, not at a blank last line
            return self.src.error(message, self.toks[self.pos - 1][END], 1, hint)
        length = (end if end is not None else tok[END]) - tok[START]
        return self.src.error(message, tok[START], max(1, length), hint)

    @staticmethod
    def found(tok: Token) -> str:
        if tok[KIND] == EOF:
            return "end of input"
        if tok[KIND] == STR:
            return "a string"
        return f"`{tok[TEXT]}`"

    def expect(self, text: str, context: str = "", hint: str | None = None, **fmt: str) -> Token:
        """Consume `text` or fail. `context` and `hint` are formatted with `fmt` only on failure.
        A missing `;` at the end of a line is reported right after the previous token (where it
        belongs), not at the start of the next line."""
        tok = self.toks[self.pos]
        if tok[TEXT] == text:
            self.pos += 1
            return tok
        if fmt:
            context = context.format(**fmt)
            hint = hint.format(**fmt) if hint else hint
        message = f"expected `{text}`{' ' + context if context else ''}, found {self.found(tok)}"
        prev = self.toks[self.pos - 1] if self.pos else None
        if text == ";" and prev is not None and self.src.loc(prev[END]).line < self.src.loc(tok[START]).line:
            raise self.src.error(message, prev[END], 1, hint or "add `;` here")
        raise self.error(tok, message, hint)

    def expect_name(self, what: str, hint: str | None = None) -> Token:
        tok = self.tok
        if tok[KIND] == IDENT:
            self.pos += 1
            return tok
        if tok[KIND] == KW:
            raise self.error(tok, f"`{tok[TEXT]}` is a keyword and cannot be used as {what}",
                             "Rust keywords (in, type, loop, ref, return, yield, ...) are reserved; "
                             "choose another name")
        raise self.error(tok, f"expected {what}, found {self.found(tok)}", hint)

    def loc(self, tok: Token):
        return self.src.loc(tok[START])

    def int_value(self, tok: Token, negative: bool = False, limit: int = I64_MAX) -> int:
        value = -tok[VALUE] if negative else tok[VALUE]
        if value > limit or value < -I64_MAX - 1:
            raise self.error(tok, f"integer literal `{tok[TEXT]}` is out of range",
                             f"values must lie in {-I64_MAX - 1}..={limit}")
        return value

    # ------------------------------------------------------------------ graph, sections, blocks

    def graph(self) -> Graph:
        while self.tok[KIND] != EOF:
            tok = self.tok
            if tok[KIND] == IDENT and tok[TEXT] in _SECTION_KINDS:
                self.section()
            elif tok[KIND] == IDENT and tok[TEXT] == "block":
                self.block()
            else:
                raise self.error(tok, f"expected memory section or block, found {self.found(tok)}",
                                 self._top_level_hint(tok))
        return Graph(vars=self.vars, blocks=self.blocks, next_index=self.next_index,
                     source_name=self.src.name, source_lines=self.src.lines)

    def _top_level_hint(self, tok: Token) -> str:
        if tok[TEXT] == "graph" and self.peek()[TEXT] == "!":
            return "a .oig file holds only the body of `graph! { ... }`, without the macro call"
        if tok[KIND] == IDENT:
            suggestion = hints.did_you_mean(tok[TEXT], (*hints.SECTIONS, "block"))
            if suggestion:
                return suggestion
        if tok[TEXT] == "}":
            return "this `}` closes nothing"
        return "the top level holds `dynamic`/`volatile`/`constant`/`persistent { ... }` sections " \
               "and `block NAME { ... }` blocks"

    def section(self) -> None:
        kw = self.advance()
        kind = _SECTION_KINDS[kw[TEXT]]
        self.expect("{", "after `{kw}`", kw=kw[TEXT])
        while not self.at("}"):
            if self.tok[KIND] == EOF:
                raise self.error(self.tok, f"expected `}}` to close the `{kw[TEXT]}` section, found end of input",
                                 f"the section starts at line {self.loc(kw).line}")
            self.var_decl(kind)
        self.advance()

    def block(self) -> None:
        self.advance()
        name = self.expect_name("a block name")
        self.expect("{", "after `block {name}`", name=name[TEXT])
        nodes = self.nodes_until_brace(f"block `{name[TEXT]}`", name)
        if name[TEXT] in self.blocks:
            first = self.blocks[name[TEXT]].loc
            raise self.error(name, f"duplicate block `{name[TEXT]}`",
                             f"`{name[TEXT]}` is already defined at line {first.line}; merge the two blocks into one")
        self.blocks[name[TEXT]] = Block(name[TEXT], tuple(nodes), self.loc(name))

    def nodes_until_brace(self, what: str, opener: Token) -> list[Node]:
        nodes = []
        while not self.at("}"):
            if self.tok[KIND] == EOF:
                raise self.error(self.tok, f"expected `}}` to close {what}, found end of input",
                                 f"{what} starts at line {self.loc(opener).line}")
            nodes.append(self.node())
        self.advance()
        return nodes

    # ------------------------------------------------------------------ declarations

    def var_decl(self, kind: MemoryKind) -> None:
        name = self.expect_name("a variable name")
        table_indices: tuple[str, ...] = ()
        if self.at("("):
            opener = self.advance()
            table_indices = tuple(t[TEXT] for t in self.name_list(")", "an index name"))
            if not table_indices:
                raise self.error(opener, "prefix table must declare at least one index", end=self.tok[END])
            self.advance()
        if not self.at(":"):
            raise self.error(self.tok, f"expected `:` after `{name[TEXT]}`, found {self.found(self.tok)}",
                             self._decl_colon_hint(name))
        self.advance()
        dtype = self.dtype()
        dims = self.dims() if self.at("[") else ()
        attrs = self.var_attributes(dtype)
        if not self.at(";") and (self.tok[KIND] in (IDENT, KW)) and \
                (self.tok[TEXT] in hints.ATTRIBUTES or self.tok[TEXT] in hints.OLD_FORMS):
            raise self.error(self.tok, f"attribute `{self.tok[TEXT]}` is missing its `@`",
                             f"write `@{self.tok[TEXT]}`" if self.tok[TEXT] in hints.ATTRIBUTES
                             else hints.OLD_FORMS[self.tok[TEXT]])
        self.expect(";", "after the declaration of `{name}`", name=name[TEXT])
        if name[TEXT] in self.vars:
            first = self.vars[name[TEXT]]
            raise self.error(name, f"duplicate variable `{name[TEXT]}`",
                             f"`{name[TEXT]}` is already declared at line {first.loc.line} "
                             f"(in the `{first.kind.section}` section); each variable is declared once")
        self.vars[name[TEXT]] = VarDecl(name=name[TEXT], kind=kind, dtype=dtype, dims=dims,
                                       table_indices=table_indices, loc=self.loc(name), **attrs)

    def _decl_colon_hint(self, name: Token) -> str:
        if self.at("="):
            return f"declarations use a colon: `{name[TEXT]}: f32[B, D];`"
        if name[TEXT] in _SECTION_KINDS or name[TEXT] == "block":
            return "is a `}` missing before this line?"
        return f"declarations look like `{name[TEXT]}: f32[B, D];`"

    def dtype(self) -> DTypeInfo:
        tok = self.tok
        if tok[KIND] == IDENT and is_dtype_name(tok[TEXT]):
            self.pos += 1
            return lookup(tok[TEXT])
        if tok[KIND] == IDENT:
            raise self.error(tok, f"unsupported dtype `{tok[TEXT]}`", hints.dtype_hint(tok[TEXT]))
        raise self.error(tok, f"expected a dtype, found {self.found(tok)}", hints.dtype_hint(""))

    def dims(self) -> tuple[str, ...]:
        opener = self.advance()
        dims = []
        while not self.at("]"):
            if self.tok[KIND] == EOF:
                raise self.error(opener, "unclosed `[` in dimensions", "close the dimension list with `]`")
            left = self.dim_atom()
            if self.accept("*"):
                left = f"{left}*{self.dim_atom()}"
                if self.at("*"):
                    raise self.error(self.tok, "a dimension may contain at most one `*`",
                                     "declare the product as its own size variable in the model")
            dims.append(left)
            self.accept(",")
        self.advance()
        return tuple(dims)

    def dim_atom(self) -> str:
        tok = self.tok
        if tok[KIND] == INT:
            self.pos += 1
            return str(tok[VALUE])
        if tok[KIND] == IDENT:
            self.pos += 1
            return tok[TEXT]
        if tok[KIND] == KW:
            self.expect_name("a dimension")
        hint = "dimensions cannot be negative" if tok[TEXT] == "-" else \
            "a dimension is an integer, a size variable, or a product `A*B`"
        raise self.error(tok, f"expected identifier or integer for dimension expression, found {self.found(tok)}",
                         hint)

    def var_attributes(self, dtype: DTypeInfo) -> dict:
        attrs: dict = {}
        seen: dict[str, Token] = {}
        init: tuple[Token, bool | int | float] | None = None
        while self.at("@"):
            at = self.advance()
            tok = self.tok
            name = tok[TEXT] if tok[KIND] in (IDENT, KW) else ""
            if name not in hints.ATTRIBUTES:
                if not name:
                    raise self.error(tok, f"expected an attribute name after `@`, found {self.found(tok)}",
                                     "attributes: " + " ".join("@" + a for a in hints.ATTRIBUTES))
                raise self.error(at, f"unsupported attribute `@{name}`",
                                 hints.did_you_mean(name, hints.ATTRIBUTES) or
                                 "attributes: " + " ".join("@" + a for a in hints.ATTRIBUTES), end=tok[END])
            if name in seen:
                raise self.error(at, f"duplicate @{name} attribute",
                                 f"@{name} is already given at column {self.loc(seen[name]).col}", end=tok[END])
            seen[name] = at
            self.advance()
            if name == "init":
                init = self.init_literal()
            elif name == "ref":
                attrs["ref_name"] = self.ref_attribute()
            elif name == "pattern":
                self.expect("(", "after @pattern")
                attrs["pattern"] = self.string("a pattern string", 'e.g. @pattern("w.{l}")')
                self.expect(")", "to close @pattern(...)")
            elif name == "table":
                attrs["table"] = True
            elif name == "auto_dim":
                self.expect("(", "after @auto_dim")
                indices = self.name_list(")", "an index name")
                if not indices:
                    raise self.error(at, "@auto_dim requires at least one index", end=self.tok[END])
                self.advance()
                attrs["auto_dim"] = tuple(t[TEXT] for t in indices)
            else:
                attrs["fixed"] = self.fixed_attribute(at)
        if init is not None:
            # checked after all attributes, as the original did (a duplicate @init is reported first)
            tok, literal = init
            try:
                attrs["init"] = InitValue(init_value(literal, dtype))
            except InitRuleError as exc:
                raise self.error(tok, exc.message, exc.hint) from None
        return attrs

    def init_literal(self) -> tuple[Token, bool | int | float]:
        self.expect("(", "after @init")
        negative = self.accept("-")
        tok = self.tok
        if tok[KIND] == FLOAT:
            literal: bool | int | float = -tok[VALUE] if negative else tok[VALUE]
        elif tok[KIND] == INT:
            literal = self.int_value(tok, negative, U64_MAX)
        elif tok[KIND] == KW and tok[TEXT] in ("true", "false"):
            if negative:
                raise self.error(self.toks[self.pos - 1], "boolean init cannot be negative", end=tok[END])
            literal = tok[VALUE]
        else:
            raise self.error(tok, f"expected numeric or boolean literal for init, found {self.found(tok)}",
                             "e.g. @init(0.0), @init(-3), @init(true)")
        self.pos += 1
        self.expect(")", "to close @init(...)")
        return tok, literal

    def ref_attribute(self) -> str:
        self.expect("(", "after @ref")
        tok = self.tok
        if tok[KIND] in (STR, IDENT, KW) and not (tok[KIND] == KW and tok[TEXT] in ("true", "false")):
            self.pos += 1
            self.expect(")", "to close @ref(...)")
            return tok[VALUE]
        raise self.error(tok, f"expected the model tensor name, found {self.found(tok)}", 'e.g. @ref("w.0")')

    def fixed_attribute(self, at: Token) -> tuple[tuple[str, int], ...]:
        self.expect("(", "after @fixed")
        entries: list[tuple[str, int]] = []
        while not self.at(")"):
            if self.tok[KIND] == INT:
                raise self.error(self.tok, f"expected an index name, found {self.found(self.tok)}",
                                 "@fixed takes `index=size` pairs, e.g. @fixed(i=1024)")
            index = self.expect_name("an index name", "@fixed takes `index=size` pairs, e.g. @fixed(i=1024)")
            self.expect("=", "after `{index}` in @fixed", "@fixed takes `index=size` pairs, e.g. @fixed(i=4)",
                        index=index[TEXT])
            size = self.tok
            if size[KIND] != INT:
                raise self.error(size, f"expected a non-negative integer size, found {self.found(size)}")
            self.pos += 1
            if any(name == index[TEXT] for name, _ in entries):
                raise self.error(index, f"duplicate index `{index[TEXT]}` in @fixed")
            entries.append((index[TEXT], self.int_value(size, limit=U64_MAX)))
            self.accept(",")
        self.advance()
        if not entries:
            raise self.error(at, "@fixed requires at least one entry", "e.g. @fixed(i=4)",
                             end=self.toks[self.pos - 1][END])
        return tuple(entries)

    def string(self, what: str, hint: str) -> str:
        tok = self.tok
        if tok[KIND] != STR:
            raise self.error(tok, f"expected {what}, found {self.found(tok)}", hint)
        self.pos += 1
        return tok[VALUE]

    def name_list(self, closer: str, what: str) -> list[Token]:
        """`a, b c,` up to (not including) `closer`: names with optional commas (the original's rule)."""
        names = []
        while not self.at(closer):
            if self.tok[KIND] == EOF:
                raise self.error(self.tok, f"expected `{closer}`, found end of input")
            names.append(self.expect_name(what))
            self.accept(",")
        return names

    # ------------------------------------------------------------------ nodes

    def make(self, cls: type, tok: Token, **fields) -> Node:
        index = self.next_index
        self.next_index += 1
        node = cls(index=index, uuid="", loc=self.loc(tok), **fields)
        # The UUID derives from the description, which needs the finished node; the node is not
        # shared yet, so setting the field in place is safe (and much cheaper than a copy).
        object.__setattr__(node, "uuid", node_uuid(index, describe_node(node)))
        return node

    def node(self) -> Node:
        tok = self.toks[self.pos]
        # Dispatch on the text alone: no literal's text can equal a node word, and the keyword
        # node words (loop, yield, await, return) can only ever be keywords.
        handler = _NODE_PARSERS.get(tok[TEXT])
        if handler is None:
            raise self.error(tok, f"unsupported node {self.found(tok)}", self._node_hint(tok))
        return handler(self, tok)

    def assign_node(self, tok: Token) -> Assign:
        self.pos += 1
        name = self.expect_name("a variable name")
        self.expect(":", "after `assign {name}`", name=name[TEXT])
        dtype = self.dtype()
        dims = self.dims() if self.at("[") else ()
        self.expect(";", "after the assign")
        return self.make(Assign, tok, name=name[TEXT], dtype=dtype, dims=dims)

    def barrier_node(self, tok: Token) -> Barrier:
        self.pos += 1
        self.expect(";", "after `barrier`")
        return self.make(Barrier, tok)

    def transfer_node(self, tok: Token) -> Transfer:
        self.pos += 1
        src = self.var_ref("the source variable")
        self.expect(">>", "in transfer", "write `transfer src >> dst;`")
        dst = self.var_ref("the destination variable")
        self.expect(";", "after the transfer")
        return self.make(Transfer, tok, src=src, dst=dst)

    def return_node(self, tok: Token) -> Return:
        self.pos += 1
        if not self.at(";"):
            raise self.error(self.tok, "return takes no value",
                             "outputs are variables the host fetches by name: write the result into "
                             "a declared variable, then end the block with `return;`")
        self.pos += 1
        return self.make(Return, tok)

    def _node_hint(self, tok: Token) -> str:
        nxt = self.peek()
        if tok[KIND] == IDENT:
            if tok[TEXT] in _SECTION_KINDS or tok[TEXT] == "block":
                return f"`{tok[TEXT]}` belongs at the top level; is a `}}` missing before it?"
            if nxt[TEXT] == ":":
                return "variables are declared in the memory sections (dynamic, volatile, constant, persistent)"
            if nxt[TEXT] == "(":
                return f"ops are written `op {tok[TEXT]}(inputs, setting=value) >> output;`"
            suggestion = hints.did_you_mean(tok[TEXT], hints.NODE_WORDS)
            if suggestion:
                return suggestion
        if tok[TEXT] == "if":
            return "conditions are written `branch cond then_block else_block;`"
        if tok[TEXT] in ("for", "while"):
            return "loops are written `loop name (i in start..end) { ... }`"
        return f"a node is one of: {_NODE_LIST}"

    def op_node(self, op_tok: Token) -> Op:
        self.pos += 1
        name = self.expect_name("an op name")
        self.expect("(", "after `op {name}`", "write `op {name}(inputs) >> output;`", name=name[TEXT])
        inputs: list[VarRef] = []
        attrs: list[Attr] = []
        seen: dict[str, Token] = {}
        toks = self.toks
        while (tok := toks[self.pos])[TEXT] != ")":
            following = toks[self.pos + 1][TEXT]
            if tok[KIND] == IDENT and following == "=":
                self.pos += 2
                if tok[TEXT] in seen:
                    raise self.error(tok, f"duplicate setting `{tok[TEXT]}`",
                                     f"`{tok[TEXT]}` is already set at column {self.loc(seen[tok[TEXT]]).col}")
                seen[tok[TEXT]] = tok
                attrs.append(Attr(tok[TEXT], self.attr_value(tok)))
            elif attrs:
                if tok[KIND] == EOF:
                    raise self.error(tok, "expected `)` to close the op's arguments, found end of input")
                raise self.error(tok, "positional args must come before settings",
                                 f"move the input before `{attrs[0].name}=...`")
            elif tok[KIND] == IDENT and following != "[":
                inputs.append(VarRef(tok[TEXT]))   # the common case, without the general var_ref path
                self.pos += 1
            elif tok[KIND] == EOF:
                raise self.error(tok, "expected `)` to close the op's arguments, found end of input")
            else:
                inputs.append(self.var_ref("an input variable",
                                           "op arguments are inputs `x`, `W[l]` or settings `name=value`"))
            if toks[self.pos][TEXT] == ",":
                self.pos += 1
        self.pos += 1
        self.op_arrow()
        out = self.expect_name("the op's output variable")
        if self.at(","):
            raise self.error(self.tok, "an op has exactly one output",
                             "write one op per output, or pack the results into one variable")
        if self.at("["):
            raise self.error(self.tok, "an op output is a plain variable name",
                             "index prefix tables only in op inputs and transfers")
        self.expect(";", "after the op")
        return self.make(Op, op_tok, op=name[TEXT], inputs=tuple(inputs), attrs=tuple(attrs), output=out[TEXT])

    def op_arrow(self) -> None:
        """`>>`; like the original (two `>` tokens), an op also accepts `> >`."""
        if self.accept(">>"):
            return
        if self.at(">") and self.peek()[TEXT] == ">" and self.peek()[KIND] == PUNCT:
            self.pos += 2
            return
        raise self.error(self.tok, f"expected `>>` and the op's output, found {self.found(self.tok)}",
                         "every op writes exactly one output: `op add(a, b) >> out;`")

    def attr_value(self, name: Token) -> AttrValue:
        tok = self.tok
        if name[TEXT] == "to":
            if tok[KIND] != IDENT:
                raise self.error(tok, "to must be a dtype identifier", "e.g. to=f16")
            return AttrDType(self.dtype())
        if name[TEXT] == "acc":
            return self.acc_value(tok)
        if tok[KIND] == PUNCT and tok[TEXT] == "[":
            return self.list_value()
        if self.accept("-"):
            minus, tok = tok, self.tok
            if tok[KIND] == FLOAT:
                self.pos += 1
                return AttrDouble(-tok[VALUE])
            if tok[KIND] == INT:
                self.pos += 1
                return AttrInt(self.int_value(tok, negative=True))
            if tok[KIND] == IDENT and tok[TEXT] == "inf":
                self.pos += 1
                return AttrDouble(float("-inf"))
            if tok[KIND] == IDENT:
                raise self.error(minus, "unexpected '-' before identifier",
                                 "only numbers and `inf` can be negated", end=tok[END])
            if tok[KIND] == KW and tok[TEXT] in ("true", "false"):
                raise self.error(minus, "unexpected '-' before bool literal", end=tok[END])
            if tok[KIND] == STR:
                raise self.error(minus, "unexpected '-' before string literal", end=tok[END])
            raise self.error(tok, f"expected a number after '-', found {self.found(tok)}")
        if tok[KIND] == FLOAT:
            self.pos += 1
            return AttrDouble(tok[VALUE])
        if tok[KIND] == INT:
            self.pos += 1
            return AttrInt(self.int_value(tok))
        if tok[KIND] == STR:
            self.pos += 1
            return AttrStr(tok[VALUE])
        if tok[KIND] == KW and tok[TEXT] in ("true", "false"):
            self.pos += 1
            return AttrBool(tok[VALUE])
        if tok[KIND] == IDENT:
            self.pos += 1
            return AttrDouble(float("inf")) if tok[TEXT] == "inf" else AttrVar(tok[TEXT])
        if tok[KIND] == KW:
            self.expect_name("a setting value")
        raise self.error(tok, f"expected literal or identifier for op setting `{name[TEXT]}`, found {self.found(tok)}",
                         "values: 1.5, -3, true, \"text\", [1, 2], inf, -inf, f32, [f32, f32] or a variable name")

    def acc_value(self, tok: Token) -> AttrDType | AttrDTypeList:
        if tok[KIND] == IDENT and is_dtype_name(tok[TEXT]):
            return AttrDType(self.dtype())
        if tok[KIND] == PUNCT and tok[TEXT] == "[" and self.peek()[KIND] == IDENT:
            value = self.list_value()
            if isinstance(value, AttrDTypeList):
                return value
        hint = "write the accumulation dtype(s): acc=[i32] or acc=i32"
        if tok[KIND] == IDENT:
            hint = hints.did_you_mean(tok[TEXT], hints.DTYPE_NAMES) or hint
        raise self.error(tok, "acc must be a dtype list", hint)

    def list_value(self) -> AttrIntList | AttrDimList | AttrDTypeList:
        opener = self.advance()
        if self.tok[KIND] == IDENT and is_dtype_name(self.tok[TEXT]):
            dtypes = []
            while not self.at("]"):
                if self.tok[KIND] != IDENT:
                    raise self.error(self.tok, f"expected a dtype in the dtype list, found {self.found(self.tok)}",
                                     "a list holds only integers or only dtypes")
                dtypes.append(self.dtype())
                self.accept(",")
            self.advance()
            return AttrDTypeList(tuple(dtypes))
        values: list[int | str] = []
        while not self.at("]"):
            minus = self.tok
            negative = self.accept("-")
            tok = self.tok
            if tok[KIND] == IDENT and not is_dtype_name(tok[TEXT]) and tok[TEXT] != "inf":
                if negative:
                    raise self.error(minus, "unexpected '-' before a size variable",
                                     "a size variable in a list stands for its value; write a number to count "
                                     "from the end", end=tok[END])
                self.pos += 1
                values.append(tok[TEXT])      # a size variable, resolved when binding
                if self.at("-"):              # `S-1` would silently read as the two items S and -1
                    raise self.error(self.tok, f"unexpected '-' after size variable `{tok[TEXT]}`",
                                     "settings hold no expressions; separate list items with a comma, or declare "
                                     "a size variable with the value")
                self.accept(",")
                continue
            if tok[KIND] != INT:
                if tok[KIND] == EOF:
                    raise self.error(opener, "unclosed `[` in a list value")
                raise self.error(tok, f"expected an integer in the list or a size variable, found {self.found(tok)}",
                                 "a list holds integers and size variables, or only dtypes")
            self.pos += 1
            values.append(self.int_value(tok, negative))
            self.accept(",")
        self.advance()
        if any(isinstance(v, str) for v in values):
            return AttrDimList(tuple(values))
        return AttrIntList(tuple(values))

    def var_ref(self, what: str, hint: str | None = None) -> VarRef:
        name = self.expect_name(what, hint)
        if not self.at("["):
            return VarRef(name[TEXT])
        opener = self.advance()
        indices: list[int | str] = []
        while not self.at("]"):
            tok = self.tok
            if tok[KIND] == INT:
                indices.append(self.int_value(tok))
            elif tok[KIND] == IDENT:
                indices.append(tok[TEXT])
            elif tok[KIND] == EOF:
                raise self.error(opener, "unclosed `[`")
            else:
                hint = "slices belong to cache accesses (cache.read A[0..3] >> x)" if tok[TEXT] == ".." else \
                    "prefix-table indices are loop variables, size variables or non-negative integers"
                if tok[KIND] == KW:
                    self.expect_name("an index")
                raise self.error(tok, f"expected identifier or integer index, found {self.found(tok)}", hint)
            self.pos += 1
            self.accept(",")
        if not indices:
            raise self.error(opener, "prefix access must include at least one index", end=self.tok[END])
        self.advance()
        return VarRef(name[TEXT], tuple(indices))

    def cache_node(self, tok: Token) -> Node:
        self.pos += 1
        self.expect(".", "after `cache`", "cache operations are written `cache.read`, `cache.write`, ...")
        op = self.tok
        if op[KIND] != IDENT or op[TEXT] not in hints.CACHE_OPS:
            raise self.error(op, f"unsupported cache operation {self.found(op)}",
                             (op[KIND] == IDENT and hints.did_you_mean(op[TEXT], hints.CACHE_OPS))
                             or "cache operations: " + ", ".join(hints.CACHE_OPS))
        self.advance()
        if op[TEXT] == "read":
            src = self.cache_access()
            self.expect(">>", "in cache.read", "write `cache.read A[i] >> x;`")
            dst = self.var_ref("the destination variable")
            self.expect(";", "after cache.read")
            return self.make(CacheRead, tok, src=src, dst=dst)
        if op[TEXT] == "write":
            vsrc = self.var_ref("the source variable")
            self.expect(">>", "in cache.write", "write `cache.write x >> A[i];`")
            cdst = self.cache_access()
            self.expect(";", "after cache.write")
            return self.make(CacheWrite, tok, src=vsrc, dst=cdst)
        if op[TEXT] == "reset":
            target = self.cache_access()
            self.expect(";", "after cache.reset")
            return self.make(CacheReset, tok, target=target)
        amount = 1
        if self.tok[KIND] == INT:
            amount = self.int_value(self.advance())
        elif self.at("-"):
            raise self.error(self.tok, f"the {op[TEXT]} amount cannot be negative",
                             f"use cache.{'decrement' if op[TEXT] == 'increment' else 'increment'} instead")
        target_tok = self.expect_name("the variable to " + op[TEXT])
        if self.at("["):
            raise self.error(self.tok, f"cache.{op[TEXT]} takes a plain scalar variable, not an indexed access")
        self.expect(";", "after cache.{op}", op=op[TEXT])
        cls = CacheIncrement if op[TEXT] == "increment" else CacheDecrement
        return self.make(cls, tok, target=target_tok[TEXT], amount=amount)

    def cache_access(self) -> CacheAccess:
        """`A`, `A[]`, `A[i, 0..3, 2.., ..-1, ..]`, with the original's comma rules: a leading comma
        (or an empty place between commas) is a full slice, and so is a trailing comma."""
        base = self.expect_name("a cache variable")
        if not self.at("["):
            return CacheAccess(base[TEXT])
        opener = self.advance()
        indices: list[CacheIndex] = []
        while not self.at("]"):
            if self.tok[KIND] == EOF:
                raise self.error(opener, "unclosed `[` in a cache access")
            if self.accept(","):
                indices.append(_FULL_SLICE)
                continue
            if self.accept(".."):
                indices.append(CacheSlice(None, self.cache_value_opt()))
            else:
                start = self.cache_value()
                if self.accept(".."):
                    indices.append(CacheSlice(start, self.cache_value_opt()))
                else:
                    indices.append(CacheSingle(start))
            if self.accept(",") and self.at("]"):
                indices.append(_FULL_SLICE)
        self.advance()
        return CacheAccess(base[TEXT], tuple(indices), bracketed=True)

    def cache_value_opt(self) -> int | str | None:
        return None if self.at("]") or self.at(",") else self.cache_value()

    def cache_value(self) -> int | str:
        tok = self.tok
        if self.accept("-"):
            minus, tok = tok, self.tok
            if tok[KIND] == INT:
                self.pos += 1
                return self.int_value(tok, negative=True)
            if tok[KIND] == IDENT:
                raise self.error(minus, "unexpected '-' before identifier",
                                 "only integer literals can be negative (`A[0..-3]`)", end=tok[END])
        elif tok[KIND] == INT:
            self.pos += 1
            return self.int_value(tok)
        elif tok[KIND] == IDENT:
            self.pos += 1
            return tok[TEXT]
        if tok[KIND] == KW:
            self.expect_name("a cache index")
        raise self.error(tok, f"expected identifier or integer for cache index, found {self.found(tok)}",
                         "cache indices are integers or names; slices are `a..b`, `a..`, `..b` or `..`")

    def branch_node(self, tok: Token) -> Branch:
        self.pos += 1
        first = self.expect_name("a block name or condition")
        if self.accept(";"):
            return self.make(Branch, tok, then_block=first[TEXT])
        second = self.expect_name("a block name")
        if self.at(";"):
            raise self.error(self.tok, "branch expects condition and two target blocks",
                             "write `branch cond then_block else_block;` or `branch block;`")
        third = self.expect_name("the else block name")
        self.expect(";", "after the branch")
        return self.make(Branch, tok, cond=first[TEXT], then_block=second[TEXT], else_block=third[TEXT])

    def dep_node(self, tok: Token) -> Dep:
        self.pos += 1
        targets = []
        for word in ("after", "before"):
            if not (self.tok[KIND] == IDENT and self.tok[TEXT] == word):
                raise self.error(self.tok, f"expected `{word}(...)`, found {self.found(self.tok)}",
                                 "write `dep after(X) before(Y);`")
            self.advance()
            self.expect("(", "after `{word}`", word=word)
            targets.append(self.dep_target())
            self.expect(")", "to close `{word}(...)`", "name one node: a label, an op name or a kind like cache.write",
                        word=word)
        self.expect(";", "after the dep")
        return self.make(Dep, tok, after=targets[0], before=targets[1])

    def dep_target(self) -> str:
        tok = self.tok
        if tok[KIND] == KW and tok[TEXT] in _KEYWORD_NODE_KINDS:
            self.pos += 1
            return tok[TEXT]
        name = self.expect_name("a node label, op name or node kind")
        if self.accept("."):
            return f"{name[TEXT]}.{self.expect_name('a node kind after the dot')[TEXT]}"
        return name[TEXT]

    def loop_node(self, tok: Token) -> Loop:
        self.pos += 1
        name = self.expect_name("a loop name")
        self.expect("(", "after `loop {name}`", "write `loop {name} (i in 0..N) {{ ... }}`", name=name[TEXT])
        var = self.expect_name("a loop index variable")
        if not (self.tok[KIND] == KW and self.tok[TEXT] == "in"):
            raise self.error(self.tok, f"expected `in`, found {self.found(self.tok)}",
                             f"write `loop {name[TEXT]} ({var[TEXT]} in 0..N)`")
        self.advance()
        start = self.loop_bound("start")
        self.expect("..", "in the loop range", "a loop range is `start..end` (end excluded)")
        end = self.loop_bound("end")
        self.expect(")", "to close the loop range", "loop ranges have no step; write `(i in start..end)`")
        opener = self.expect("{", "to open the loop body")
        self.loop_depth += 1
        if self.loop_depth > MAX_LOOP_DEPTH:
            raise self.error(tok, f"loops nested more than {MAX_LOOP_DEPTH} deep")
        body = self.nodes_until_brace(f"the body of loop `{name[TEXT]}`", opener)
        self.loop_depth -= 1
        # The loop takes the index after its body, as the original numbers it.
        return self.make(Loop, tok, name=name[TEXT], var=var[TEXT], start=start, end=end, body=tuple(body))

    def loop_bound(self, which: str) -> int | str:
        tok = self.tok
        if tok[KIND] == INT:
            self.pos += 1
            return self.int_value(tok)
        if tok[KIND] == IDENT:
            self.pos += 1
            return tok[TEXT]
        if tok[KIND] == KW:
            self.expect_name("a loop bound")
        if tok[TEXT] == "=" and which == "end":
            hint = "ranges are half-open `start..end`; `..=` is not supported"
        elif tok[TEXT] == "-":
            hint = "loop bounds cannot be negative"
        elif tok[TEXT] == ".." and which == "start":
            hint = "a loop range needs a start: `0..N`"
        else:
            hint = "a loop bound is an integer literal or a variable / size name"
        raise self.error(tok, f"expected identifier or integer for loop range, found {self.found(tok)}", hint)

    def yield_await_node(self, tok: Token) -> Node:
        self.pos += 1
        names = []
        while not self.at(";"):
            names.append(self.expect_name(f"a variable to {tok[TEXT]}")[TEXT])
            if not self.accept(","):
                break
        if not names:
            raise self.error(self.tok, f"{tok[TEXT]} expects at least one variable", f"write `{tok[TEXT]} x;`")
        comma_hint = "separate the variables with commas: `{kw} a, b;`" if self.tok[KIND] == IDENT else None
        self.expect(";", "after `{kw}`", comma_hint, kw=tok[TEXT])
        return self.make(Yield if tok[TEXT] == "yield" else Await, tok, vars=tuple(names))


_NODE_PARSERS = {
    "op": _Parser.op_node, "cache": _Parser.cache_node, "assign": _Parser.assign_node,
    "branch": _Parser.branch_node, "barrier": _Parser.barrier_node, "dep": _Parser.dep_node,
    "transfer": _Parser.transfer_node, "loop": _Parser.loop_node, "yield": _Parser.yield_await_node,
    "await": _Parser.yield_await_node, "return": _Parser.return_node,
}
