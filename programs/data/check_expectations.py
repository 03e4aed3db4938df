#!/usr/bin/env python3
"""Independent cross-check of the `# expect...` lines of the programs in programs/ (not part of the build).

A tiny single-worker SIAL model written in Python/numpy, covering only what these programs use.  Semantics follow
SIAL-SPEC.md for one worker: pardo runs every iteration in order, barriers end the section, put/get act on a local
copy of each distributed/served array, collective s += e is s += e.  It checks that blocks exist before they are
read, that distributed blocks are fetched in the current section, temp scoping, and the print formats of 7.12.

usage: python3 programs/data/check_expectations.py programs/*.sial programs/persistence_job.toml
  (programs with a '# job:' line run only through their job .toml)
"""
import sys, os, re, math
import numpy as np
try:
    import tomllib
except ImportError:
    import tomli as tomllib

class SialError(Exception):
    pass

class Stop(Exception):
    pass

TOK = re.compile(r'\s*(?:(?P<str>"[^"]*")|(?P<dbl>\d+\.\d*|\.\d+)|(?P<int>\d+)|(?P<id>[A-Za-z][A-Za-z0-9_.]*)|'
                 r'(?P<op>\*\*|\+=|-=|\*=|==|!=|<=|>=|[-+*/^()\[\]:,<>=]))')

def tokenize(line):
    out = []
    pos = 0
    line = line.rstrip('\n')
    # strip comments (outside strings)
    s = ''
    inq = False
    for ch in line:
        if ch == '"':
            inq = not inq
        if ch == '#' and not inq:
            break
        s += ch
    while pos < len(s):
        if s[pos:].strip() == '':
            break
        m = TOK.match(s, pos)
        if not m:
            raise SialError('lex error at %r' % s[pos:])
        pos = m.end()
        for k in ('str', 'dbl', 'int', 'id', 'op'):
            v = m.group(k)
            if v is not None:
                if k == 'id':
                    v = v.lower()
                out.append((k, v))
                break
    return out

# ---------------------------------------------------------------- expression parser
class P:
    def __init__(self, toks):
        self.t = toks
        self.i = 0
    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else (None, None)
    def next(self):
        tok = self.peek()
        self.i += 1
        return tok
    def expect(self, v):
        tok = self.next()
        if tok[1] != v:
            raise SialError('expected %s got %s' % (v, tok))
        return tok
    def at_end(self):
        return self.i >= len(self.t)

    def expr(self):
        e = self.term()
        while self.peek()[1] in ('+', '-') and self.peek()[0] == 'op':
            op = self.next()[1]
            e = ('bin', op, e, self.term())
        return e
    def term(self):
        e = self.power()
        while self.peek()[1] in ('*', '/', '^') and self.peek()[0] == 'op':
            op = self.next()[1]
            e = ('bin', op, e, self.power())
        return e
    def power(self):
        e = self.cast()
        while self.peek()[1] == '**':
            self.next()
            e = ('bin', '**', e, self.cast())
        return e
    def cast(self):
        if self.peek()[1] == '(' and self.peek(1)[1] in ('int', 'scalar', 'index') and self.peek(2)[1] == ')':
            self.next(); ty = self.next()[1]; self.next()
            return ('cast', ty, self.cast())
        return self.unary()
    def unary(self):
        if self.peek()[1] == '-' and self.peek()[0] == 'op':
            self.next()
            return ('neg', self.primary())
        if self.peek()[1] == 'sqrt':
            self.next()
            return ('sqrt', self.primary())
        return self.primary()
    def primary(self):
        k, v = self.next()
        if v == '(' and k == 'op':
            e = self.expr()
            self.expect(')')
            return e
        if k == 'int':
            return ('int', int(v))
        if k == 'dbl':
            return ('dbl', float(v))
        if k == 'str':
            return ('str', v[1:-1])
        if k == 'id':
            if self.peek()[1] == '[':
                return self.blockref(v)
            return ('id', v)
        raise SialError('unexpected token %r' % (v,))
    def blockref(self, name):
        self.expect('[')
        # decide: contiguous ref if a ':' appears before the closing bracket
        depth = 0; j = self.i; contig = False
        while j < len(self.t):
            tv = self.t[j][1]
            if tv in ('(', '['): depth += 1
            elif tv in (')', ']'):
                if depth == 0: break
                depth -= 1
            elif tv == ':' and depth == 0: contig = True
            j += 1
        if contig:
            rngs = []
            while True:
                lo = self.expr(); self.expect(':'); hi = self.expr()
                rngs.append((lo, hi))
                if self.peek()[1] == ',':
                    self.next(); continue
                break
            self.expect(']')
            return ('cblk', name, rngs)
        idx = []
        while True:
            cast = False
            if self.peek()[1] == '(':
                self.next(); self.expect('index'); self.expect(')'); cast = True
            if self.peek()[1] == '*':
                self.next(); idx.append((False, '*'))
            else:
                idx.append((cast, self.next()[1]))
            if self.peek()[1] == ',':
                self.next(); continue
            break
        self.expect(']')
        return ('blk', name, idx)

# ---------------------------------------------------------------- program structure
INDEX_KINDS = ('aoindex', 'moindex', 'moaindex', 'mobindex', 'index', 'laindex')
ARRAY_KINDS = ('static', 'temp', 'local', 'distributed', 'served')
MODS = ('predefined', 'contiguous', 'sparse')

class Prog:
    def __init__(self):
        self.decls = {}      # name -> dict
        self.procs = {}
        self.body = []
        self.name = None
        self.files = {}

def qual(name):
    return name


def bare(name):
    return name.split('.')[-1]

DECL_WORDS = ('scalar', 'int', 'subindex', 'special', 'proc', 'static', 'temp', 'local', 'distributed', 'served') + \
    ('aoindex', 'moindex', 'moaindex', 'mobindex', 'index', 'laindex')

def parse_file(path, prog, seen):
    path = os.path.abspath(path)
    if path in seen:
        return seen[path]
    lines = open(path).read().replace('\r', '\n').split('\n')
    toks = [(n + 1, tokenize(l)) for n, l in enumerate(lines)]
    toks = [(n, t) for n, t in toks if t]
    i = 0
    imports = []
    while toks[i][1][0][1] == 'import':
        fn = toks[i][1][1][1][1:-1]
        imports.append(parse_file(os.path.join(os.path.dirname(path), fn), prog, seen))
        i += 1
    assert toks[i][1][0][1] == 'sial'
    pname = toks[i][1][1][1]
    seen[path] = pname
    # names declared in this file
    own = set()
    for ln, t in toks[i + 1:]:
        words = [v for k, v in t]
        j = 0
        while j < len(words) and words[j] in MODS:
            j += 1
        if j < len(words) and words[j] in DECL_WORDS and len(words) > j + 1:
            own.add(words[j + 1])
    prog.files[pname] = own
    def canon(v):
        if '.' in v:
            return v
        if v in own:
            return pname + '.' + v
        cands = [q for q in imports if v in prog.files[q]]
        if len(cands) == 1:
            return cands[0] + '.' + v
        if len(cands) > 1:
            raise SialError('%s multiply defined' % v)
        return v
    toks = [(ln, [(k, canon(v) if k == 'id' else v) for k, v in t]) for ln, t in toks]
    i += 1
    # declarations
    while True:
        ln, t = toks[i]
        words = [v for k, v in t]
        j = 0
        mods = []
        while words[j] in MODS:
            mods.append(words[j]); j += 1
        w = words[j]
        if w in ('scalar', 'int'):
            name = words[j + 1]
            init = None
            if len(words) > j + 2:
                init = float(words[j + 3]) if w == 'scalar' else int(words[j + 3])
            prog.decls[name] = dict(kind=w, pre='predefined' in mods, init=init)
        elif w in INDEX_KINDS:
            name = words[j + 1]
            rest = words[j + 3:]
            # lo ':' hi with optional '-' signs
            k = 0
            def rv():
                nonlocal k
                if rest[k] == '-':
                    k += 1; v = -int(rest[k]); k += 1; return v
                v = rest[k]; k += 1
                return int(v) if v.isdigit() else v
            lo = rv(); k += 1; hi = rv()
            prog.decls[name] = dict(kind='index', ikind=w, lo=lo, hi=hi)
        elif w == 'subindex':
            prog.decls[words[j + 1]] = dict(kind='subindex', parent=words[j + 3])
        elif w in ARRAY_KINDS or w == 'local':
            name = words[j + 1]
            dims = [x for x in words[j + 3:-1] if x != ',']
            akind = w
            if w == 'local' and 'contiguous' in mods:
                akind = 'contig'
            prog.decls[name] = dict(kind='array', akind=akind, dims=dims, pre='predefined' in mods)
        elif w == 'special':
            prog.decls[words[j + 1]] = dict(kind='special', sig=bare(words[j + 2]) if len(words) > j + 2 else '')
        elif w == 'proc':
            pname2 = words[j + 1]
            i += 1
            body, i = parse_block(toks, i, ('endproc',))
            prog.procs[pname2] = body
        else:
            break
        i += 1
    body, i = parse_block(toks, i, ('endsial',))
    prog.body = body
    prog.name = pname
    return pname

def parse_block(toks, i, enders):
    body = []
    while True:
        ln, t = toks[i]
        w = t[0][1]
        if w in enders:
            return body, i
        st, i = parse_stmt(toks, i)
        body.append(st)
        i += 1

def parse_stmt(toks, i):
    ln, t = toks[i]
    w = t[0][1]
    p = P(t)
    if w == 'do':
        var = t[1][1]
        parent = None
        if len(t) > 2 and t[2][1] == 'in':
            parent = t[3][1]
        i += 1
        wh = []
        while toks[i][1][0][1] == 'where':
            wh.append(parse_rel(toks[i][1][1:])); i += 1
        body, i = parse_block(toks, i, ('enddo',))
        return ('do', ln, var, parent, wh, body), i
    if w == 'pardo':
        vars_ = []; pragma = None
        for k, v in t[1:]:
            if k == 'id': vars_.append(v)
            if k == 'str': pragma = v[1:-1]
        i += 1
        wh = []
        while toks[i][1][0][1] == 'where':
            wh.append(parse_rel(toks[i][1][1:])); i += 1
        body, i = parse_block(toks, i, ('endpardo',))
        return ('pardo', ln, vars_, pragma, wh, body), i
    if w == 'section':
        i += 1
        body, i = parse_block(toks, i, ('endsection',))
        return ('section', ln, body), i
    if w == 'gpu_on':
        i += 1
        body, i = parse_block(toks, i, ('gpu_off',))
        return ('gpu', ln, body), i
    if w == 'if':
        cond = parse_rel(t[1:])
        i += 1
        body, i = parse_block(toks, i, ('else', 'endif'))
        els = []
        if toks[i][1][0][1] == 'else':
            i += 1
            els, i = parse_block(toks, i, ('endif',))
        return ('if', ln, cond, body, els), i
    if w in ('call',):
        return ('call', ln, qual(t[1][1])), i
    if w in ('return', 'stop', 'exit', 'sip_barrier', 'server_barrier'):
        return (w, ln), i
    if w in ('allocate', 'deallocate'):
        if t[1][1] == 'contiguous':
            p.i = 2
            ref = p.primary()
            return (w + '_contig', ln, ref), i
        if len(t) == 2:
            return (w, ln, ('blk', t[1][1], None)), i
        p.i = 1
        return (w, ln, p.primary()), i
    if w in ('create', 'delete', 'destroy'):
        return (w, ln, t[1][1]), i
    if w in ('get', 'request'):
        p.i = 1
        return ('get', ln, p.primary()), i
    if w in ('put', 'prepare'):
        p.i = 1
        lhs = p.primary()
        op = p.next()[1]
        return ('put', ln, lhs, op, p.expr()), i
    if w == 'collective':
        p.i = 3
        return ('collective', ln, t[1][1], p.expr()), i
    if w == 'execute':
        p.i = 2
        args = []
        while not p.at_end():
            args.append(p.primary())
        return ('execute', ln, t[1][1], args), i
    if w in ('print', 'println'):
        p.i = 1
        return (w, ln, p.expr()), i
    if w in ('gpu_allocate', 'gpu_free', 'gpu_put', 'gpu_get'):
        return ('nop', ln), i
    if w in ('set_persistent', 'restore_persistent'):
        return (w, ln, t[1][1], t[2][1][1:-1]), i
    if w == 'assert_same':
        return ('nop', ln), i
    if w == 'broadcast_from':
        return ('nop', ln), i
    # assignment
    lhs = p.primary()
    op = p.next()[1]
    rhs = p.expr()
    assert p.at_end(), t
    return ('assign', ln, lhs, op, rhs), i

def parse_rel(t):
    p = P(t)
    l = p.expr()
    op = p.next()[1]
    r = p.expr()
    return (op, l, r)

# ---------------------------------------------------------------- runtime
class Exit(Exception):
    pass

class Ret(Exception):
    pass

def lrint(x):
    return int(round(x))

def idiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q

class Machine:
    def __init__(self, prog, setup, saved, out, base):
        self.p = prog
        self.setup = setup
        self.saved = saved
        self.out = out
        self.ints = {}
        self.scalars = {}
        self.idx = {}      # current values
        self.blocks = {}   # (array, key) -> ndarray
        self.static = {}
        self.contig = {}   # name -> list of (lo, hi, arr)
        self.fetched = set()
        self.scopes = []
        self.persist_marks = []
        self.letters = {}
        segs = setup.get('segments', {})
        self.segs = {k: list(v) for k, v in segs.items()}
        for n, d in prog.decls.items():
            if d['kind'] == 'int':
                self.ints[n] = setup['ints'][bare(n)] if d['pre'] else (d['init'] or 0)
            elif d['kind'] == 'scalar':
                self.scalars[n] = float(setup['scalars'][bare(n)]) if d['pre'] else float(d['init'] or 0.0)
        for n, d in prog.decls.items():
            if d['kind'] == 'array' and d['akind'] == 'static':
                shape = [self.full_extent(x) for x in d['dims']]
                a = np.zeros(shape)
                if d['pre']:
                    spec = setup.get('arrays', {}).get(bare(n))
                    if spec is None:
                        print('WARNING no data for', n, file=sys.stderr)
                    elif 'file' in spec:
                        a = np.load(os.path.join(base, spec['file'])).astype(float).reshape(shape)
                    else:
                        a = np.array(spec['data'], float).reshape(spec['shape'], order='F')
                        assert list(a.shape) == shape, (n, a.shape, shape)
                self.static[n] = a

    # index helpers
    def irange(self, name):
        d = self.p.decls[name]
        lo, hi = d['lo'], d['hi']
        if isinstance(lo, str): lo = self.setup['ints'][bare(lo)]
        if isinstance(hi, str): hi = self.setup['ints'][bare(hi)]
        return lo, hi
    def kind(self, name):
        d = self.p.decls[name]
        if d['kind'] == 'subindex':
            return self.kind(d['parent'])
        return d['ikind']
    def ext(self, kind, v):
        if kind == 'index':
            return 1
        return self.segs[kind][v - 1]
    def full_extent(self, name):
        lo, hi = self.irange(name)
        return sum(self.ext(self.kind(name), v) for v in range(lo, hi + 1))
    def offset(self, name, v):
        lo, hi = self.irange(name)
        if not (lo <= v <= hi):
            raise SialError('segment %d out of range of %s' % (v, name))
        return sum(self.ext(self.kind(name), s) for s in range(lo, v))
    def subsegs(self, E):
        return [E // 4 + (1 if k <= E % 4 else 0) for k in range(1, 5)]
    def ival(self, name):
        name = qual(name)
        v = self.idx.get(name)
        if v is None:
            raise SialError('index %s undefined' % name)
        return v

    # ------------------------------------------------------------ blocks
    def resolve(self, ref, intent):
        """returns (ndarray view/array, names)"""
        if ref[0] == 'cblk':
            return self.resolve_contig(ref, intent)
        if ref[0] == 'id':
            n = qual(ref[1])
            if n in self.scalars:
                return ScalarBox(self, n), []
            if n in self.static:
                return self.static[n], None
            if n in self.contig:
                return self.contig[n][0][2], None
            raise SialError('bad bare name %s' % n)
        name = qual(ref[1])
        d = self.p.decls[name]
        if d['kind'] != 'array':
            raise SialError('%s not array' % name)
        dims = d['dims']
        idx = ref[2]
        assert len(idx) == len(dims), ref
        key = []
        shape = []
        slices = []   # for slice of super block: per dim (off, ext) or None
        names = []
        for dn, (cast, rn) in zip(dims, idx):
            rn = qual(rn)
            names.append(rn)
            dd = self.p.decls[dn]
            rd = self.p.decls[rn]
            if dd['kind'] == 'subindex':
                pv = self.ival(dd['parent']) if dd['parent'] in self.idx and self.idx[dd['parent']] is not None else None
                parent = dd['parent']
                # subindex-declared dim: extent from the current value of the ref'd subindex's parent
                par = rd['parent'] if rd['kind'] == 'subindex' else parent
                pv = self.ival(par)
                v = self.ival(rn)
                E = self.ext(self.kind(par), pv)
                key.append((pv, v)); shape.append(self.subsegs(E)[v - 1]); slices.append(None)
            elif rd['kind'] == 'subindex' and not cast:
                par = rd['parent']
                pv = self.ival(par)
                v = self.ival(rn)
                E = self.ext(self.kind(dn), pv)
                ss = self.subsegs(E)
                key.append(pv); shape.append(E); slices.append((sum(ss[:v - 1]), ss[v - 1]))
            else:
                v = self.ival(rn)
                if cast:
                    assert self.kind(dn) == 'index'
                else:
                    assert self.kind(dn) == self.kind(rn), (name, dn, rn)
                lo, hi = self.irange(dn)
                if not lo <= v <= hi:
                    raise SialError('out of range %s[%s=%d]' % (name, rn, v))
                key.append(v); shape.append(self.ext(self.kind(dn), v)); slices.append(None)
        key = tuple(key)
        ak = d['akind']
        if ak == 'static':
            sl = []
            for dn, k, e in zip(dims, key, shape):
                o = self.offset(dn, k)
                sl.append(slice(o, o + e))
            blk = self.static[name][tuple(sl)]
        else:
            bk = (name, key)
            if ak in ('distributed', 'served'):
                if intent != 'r':
                    raise SialError('write to distributed block %s outside put' % (bk,))
                if bk not in self.fetched:
                    raise SialError('read of distributed block %s without get in this section' % (bk,))
                if key not in self.dist.get(name, {}):
                    raise SialError('block %s never put' % (bk,))
                blk = self.dist[name][key]
            else:
                if bk not in self.blocks:
                    if intent == 'w':
                        self.blocks[bk] = np.zeros(shape)
                        if ak == 'temp':
                            self.scopes[-1].append(bk)
                    else:
                        raise SialError('Attempting to read/update non-existent block %s' % (bk,))
                blk = self.blocks[bk]
                if list(blk.shape) != shape:
                    raise SialError('shape mismatch for %s: %s vs %s' % (bk, blk.shape, shape))
        if any(s is not None for s in slices):
            sl = tuple(slice(s[0], s[0] + s[1]) if s else slice(None) for s in slices)
            blk = blk[sl]
        return blk, names

    def resolve_contig(self, ref, intent):
        name = qual(ref[1])
        d = self.p.decls[name]
        lo = [self.eval(a) for a, b in ref[2]]
        hi = [self.eval(b) for a, b in ref[2]]
        for lst in self.contig.get(name, []):
            rlo, rhi, arr = lst
            if all(rl <= l and h <= rh for rl, l, h, rh in zip(rlo, lo, hi, rhi)):
                sl = []
                for dn, rl, l, h in zip(d['dims'], rlo, lo, hi):
                    k = self.kind(dn)
                    o = sum(self.ext(k, s) for s in range(rl, l))
                    e = sum(self.ext(k, s) for s in range(l, h + 1))
                    sl.append(slice(o, o + e))
                return arr[tuple(sl)], None
        raise SialError('contiguous region %s %s %s not allocated' % (name, lo, hi))

    def is_scalar_block(self, ref):
        if ref[0] != 'blk':
            return False
        d = self.p.decls[qual(ref[1])]
        for dn, (cast, rn) in zip(d['dims'], ref[2]):
            rd = self.p.decls[qual(rn)]
            if cast:
                continue
            if rd['kind'] == 'subindex' or rd['ikind'] != 'index':
                return False
        return True

    # ------------------------------------------------------------ expressions
    def eval(self, e):
        t = e[0]
        if t == 'int': return e[1]
        if t == 'dbl': return e[1]
        if t == 'str': return e[1]
        if t == 'id':
            n = qual(e[1])
            if n in self.ints: return self.ints[n]
            if n in self.scalars: return self.scalars[n]
            d = self.p.decls.get(n)
            if d and d['kind'] in ('index', 'subindex'):
                return self.ival(n)
            raise SialError('unknown name %s' % n)
        if t == 'blk':
            if not self.is_scalar_block(e):
                raise SialError('block %s used as scalar' % (e,))
            b, _ = self.resolve(e, 'r')
            return float(b.flat[0])
        if t == 'neg':
            return -self.eval(e[1])
        if t == 'sqrt':
            v = self.eval(e[1]); assert isinstance(v, float)
            return math.sqrt(v)
        if t == 'cast':
            v = self.eval(e[2])
            if e[1] == 'int':
                assert isinstance(v, float); return lrint(v)
            if e[1] == 'scalar':
                assert isinstance(v, int); return float(v)
            return v
        if t == 'bin':
            op, l, r = e[1], e[2], e[3]
            if op == '*' and l[0] == 'blk' and r[0] == 'blk':
                return self.full_contract(l, r)
            a = self.eval(l); b = self.eval(r)
            if isinstance(a, float) != isinstance(b, float):
                raise SialError('int/scalar mix in %s' % (e,))
            if op == '+': return a + b
            if op == '-': return a - b
            if op == '*': return a * b
            if op == '/':
                if isinstance(a, int): return idiv(a, b)
                return a / b
            if op == '**': return math.pow(a, b)
        raise SialError('cannot evaluate %s' % (e,))

    def full_contract(self, l, r):
        a, an = self.resolve(l, 'r')
        b, bn = self.resolve(r, 'r')
        assert sorted(an) == sorted(bn), (l, r)
        return float(np.einsum(self.sub(an) + ',' + self.sub(bn) + '->', a, b))

    def sub(self, names):
        return ''.join(self.letters.setdefault(n, 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'[len(self.letters)]) for n in names)

    def rel(self, c):
        op, l, r = c
        a = self.eval(l); b = self.eval(r)
        return {'<': a < b, '>': a > b, '<=': a <= b, '>=': a >= b, '==': a == b, '!=': a != b}[op]

    # ------------------------------------------------------------ statements
    def run(self, body):
        for st in body:
            self.stmt(st)

    def loop(self, vars_, wh, body, pardo):
        ranges = []
        for v in vars_:
            lo, hi = self.irange(v)
            ranges.append(range(lo, hi + 1))
            if self.idx.get(v) is not None:
                raise SialError('index %s already has value' % v)
        import itertools
        # odometer with first index fastest
        combos = itertools.product(*reversed(ranges))
        try:
            for c in combos:
                c = list(reversed(c))
                for v, x in zip(vars_, c):
                    self.idx[v] = x
                if not all(self.rel(w) for w in wh):
                    continue
                self.scopes.append([])
                try:
                    self.run(body)
                finally:
                    for bk in self.scopes.pop():
                        self.blocks.pop(bk, None)
        except Exit:
            pass
        finally:
            for v in vars_:
                self.idx[v] = None

    def stmt(self, st):
        k = st[0]
        self.line = st[1]
        if k == 'do':
            _, ln, var, parent, wh, body = st
            if parent is None:
                self.loop([var], wh, body, False)
            else:
                try:
                    for v in range(1, 5):
                        self.idx[var] = v
                        if not all(self.rel(w) for w in wh):
                            continue
                        self.scopes.append([])
                        try:
                            self.run(body)
                        finally:
                            for bk in self.scopes.pop():
                                self.blocks.pop(bk, None)
                except Exit:
                    pass
                finally:
                    self.idx[var] = None
        elif k == 'pardo':
            _, ln, vars_, pragma, wh, body = st
            self.loop(vars_, wh, body, True)
        elif k == 'section':
            self.run(st[2])
            self.barrier()
        elif k == 'gpu':
            self.run(st[2])
        elif k == 'if':
            if self.rel(st[2]):
                self.run(st[3])
            else:
                self.run(st[4])
        elif k == 'call':
            try:
                self.run(self.p.procs[st[2]])
            except Ret:
                pass
        elif k == 'return':
            raise Ret()
        elif k == 'exit':
            raise Exit()
        elif k == 'stop':
            raise Stop()
        elif k in ('sip_barrier', 'server_barrier'):
            self.barrier()
        elif k in ('allocate', 'deallocate'):
            self.alloc(st)
        elif k == 'allocate_contig':
            ref = st[2]
            lo = tuple(self.eval(a) for a, b in ref[2]); hi = tuple(self.eval(b) for a, b in ref[2])
            d = self.p.decls[qual(ref[1])]
            shape = [sum(self.ext(self.kind(dn), s) for s in range(l, h + 1)) for dn, l, h in zip(d['dims'], lo, hi)]
            for rlo, rhi, _ in self.contig.get(qual(ref[1]), []):
                if all(not (h < rl or l > rh) for l, h, rl, rh in zip(lo, hi, rlo, rhi)):
                    raise SialError('overlapping contiguous')
            self.contig.setdefault(qual(ref[1]), []).append((lo, hi, np.zeros(shape)))
        elif k == 'deallocate_contig':
            ref = st[2]
            lo = tuple(self.eval(a) for a, b in ref[2]); hi = tuple(self.eval(b) for a, b in ref[2])
            lst = self.contig[qual(ref[1])]
            n0 = len(lst)
            self.contig[qual(ref[1])] = [x for x in lst if not (x[0] == lo and x[1] == hi)]
            assert len(self.contig[qual(ref[1])]) == n0 - 1
        elif k == 'create':
            pass
        elif k in ('delete', 'destroy'):
            self.dist.pop(st[2], None)
        elif k == 'get':
            ref = st[2]
            name = qual(ref[1])
            key = tuple(self.ival(r) for c, r in ref[2])
            if key not in self.dist.get(name, {}):
                raise SialError('get of block never put %s%s' % (name, key))
            self.fetched.add((name, key))
        elif k == 'put':
            self.put(st)
        elif k == 'collective':
            v = self.eval(st[3]); assert isinstance(v, float)
            self.scalars[st[2]] += v
        elif k == 'execute':
            self.execute(st)
        elif k in ('print', 'println'):
            self.do_print(st)
        elif k == 'nop':
            pass
        elif k == 'set_persistent':
            self.persist_marks.append((st[2], st[3]))
        elif k == 'restore_persistent':
            n, lab = st[2], st[3]
            if lab not in self.saved:
                raise SialError('no persistent object ' + lab)
            kind, val = self.saved[lab]
            if n in self.scalars:
                self.scalars[n] = val; del self.saved[lab]
            elif n in self.static:
                assert self.static[n].shape == val.shape; self.static[n] = val.copy(); del self.saved[lab]
            else:
                self.dist[n] = {k2: v.copy() for k2, v in val.items()}
        elif k == 'assign':
            self.assign(st)
        else:
            raise SialError('unknown stmt %s' % k)

    dist = None

    def barrier(self):
        self.fetched = set()

    def alloc(self, st):
        ref = st[2]
        name = qual(ref[1])
        d = self.p.decls[name]
        idx = ref[2] if ref[2] is not None else [(False, '*')] * len(d['dims'])
        choices = []
        for dn, (c, rn) in zip(d['dims'], idx):
            if rn == '*':
                lo, hi = self.irange(dn); choices.append(range(lo, hi + 1))
            else:
                choices.append([self.ival(rn)])
        import itertools
        for key in itertools.product(*choices):
            bk = (name, tuple(key))
            if st[0] == 'allocate':
                shape = [self.ext(self.kind(dn), v) for dn, v in zip(d['dims'], key)]
                self.blocks[bk] = np.zeros(shape)
            else:
                if bk not in self.blocks:
                    raise SialError('attempting to remove a non-existent block %s' % (bk,))
                del self.blocks[bk]

    def put(self, st):
        _, ln, lhs, op, rhs = st
        name = qual(lhs[1])
        d = self.p.decls[name]
        key = tuple(self.ival(r) for c, r in lhs[2])
        shape = [self.ext(self.kind(dn), v) for dn, v in zip(d['dims'], key)]
        store = self.dist.setdefault(name, {})
        if rhs[0] in ('blk',) and not (self.is_scalar_block(rhs) and False):
            src, names = self.resolve(rhs, 'r')
            lnames = [qual(r) for c, r in lhs[2]]
            assert names[:len(lnames)] == lnames or lnames[:len(names)] == names, (lnames, names)
            src = src.reshape(shape, order='F') if src.size == int(np.prod(shape)) else None
            if op == '=':
                store[key] = src.copy()
            elif op == '+=':
                store[key] = store.get(key, np.zeros(shape)) + src
            else:
                raise SialError('bad put op')
        else:
            v = self.eval(rhs); assert isinstance(v, float)
            if op == '=':
                store[key] = np.full(shape, v)
            elif op == '+=':
                store[key] = store.get(key, np.zeros(shape)) + v
            elif op == '*=':
                if key not in store: raise SialError('scale of absent block')
                store[key] = store[key] * v

    def set_block(self, lhs, value, op):
        """write value (ndarray in lhs layout or float) into lhs with op"""
        if lhs[0] == 'id':
            raise SialError('bad')
        intent = 'w' if op == '=' else 'u'
        dst, names = self.resolve(lhs, intent)
        if op == '=':
            dst[...] = value
        elif op == '+=':
            dst[...] += value
        elif op == '-=':
            dst[...] -= value
        elif op == '*=':
            dst[...] *= value

    def perm_to(self, src, snames, dnames, dshape):
        if sorted(snames) == sorted(dnames) and len(snames) == len(dnames):
            return np.einsum(self.sub(snames) + '->' + self.sub(dnames), src)
        # extra trailing simple indices
        n = min(len(snames), len(dnames))
        assert snames[:n] == dnames[:n], (snames, dnames)
        return src.reshape(dshape, order='F')

    def assign(self, st):
        _, ln, lhs, op, rhs = st
        if lhs[0] == 'id':
            n = qual(lhs[1])
            v = self.eval(rhs)
            if n in self.ints:
                assert isinstance(v, int), st
                cur = self.ints[n]
                self.ints[n] = {'=': v, '+=': cur + v, '-=': cur - v, '*=': cur * v}[op]
            else:
                assert isinstance(v, float), st
                cur = self.scalars[n]
                self.scalars[n] = {'=': v, '+=': cur + v, '-=': cur - v, '*=': cur * v}[op]
            return
        # block lhs
        intent = 'w' if op == '=' else 'u'
        if rhs[0] in ('blk', 'cblk') and not (rhs[0] == 'blk' and self.is_scalar_block(rhs) and not self.lhs_scalar_block_copy(lhs, rhs)):
            src, snames = self.resolve(rhs, 'r')
            src = np.array(src)
            dst, dnames = self.resolve(lhs, intent)
            if op == '*=':
                raise SialError('block *= block')
            if snames is None or dnames is None:   # contiguous
                val = src.reshape(dst.shape)
            else:
                val = self.perm_to(src, snames, dnames, dst.shape)
            self.apply(dst, val, op)
            return
        if rhs[0] == 'bin' and rhs[2][0] == 'blk' and rhs[3][0] == 'blk' and rhs[1] in '+-*^':
            l, r = rhs[2], rhs[3]
            a, an = self.resolve(l, 'r'); b, bn = self.resolve(r, 'r')
            a = np.array(a); b = np.array(b)
            if rhs[1] in '+-':
                dst, dn = self.resolve(lhs, intent)
                assert an == bn == dn, st
                val = a + b if rhs[1] == '+' else a - b
                if op != '=': raise SialError('+= l+r not allowed')
                self.apply(dst, val, op)
                return
            # contraction / tensor
            dnames_ = [qual(r) for c, r in lhs[2]]
            if set(an) == set(bn) and set(an) == set(dnames_):
                raise SialError('hadamard not allowed')
            if rhs[1] == '^':
                assert not set(an) & set(bn)
            val = np.einsum(self.sub(an) + ',' + self.sub(bn) + '->' + self.sub(dnames_), a, b)
            if op == '-=': raise SialError('-= contraction')
            dst, dn = self.resolve(lhs, intent)
            if l[1] == lhs[1] and l[2] == lhs[2] or r[1] == lhs[1] and r[2] == lhs[2]:
                raise SialError('contraction lhs is operand')
            self.apply(dst, val, op)
            return
        if rhs[0] == 'bin' and rhs[1] == '*' and (rhs[2][0] == 'blk') != (rhs[3][0] == 'blk'):
            bref, sexp = (rhs[2], rhs[3]) if rhs[2][0] == 'blk' else (rhs[3], rhs[2])
            if not self.is_scalar_block(bref):
                s = self.eval(sexp); assert isinstance(s, float)
                b, bn = self.resolve(bref, 'r'); b = np.array(b)
                dst, dn = self.resolve(lhs, intent)
                assert bn == dn, st
                if op == '-=': raise SialError('-= scaled')
                self.apply(dst, b * s, op)
                return
        v = self.eval(rhs)
        assert isinstance(v, float), st
        dst, dn = self.resolve(lhs, intent)
        self.apply(dst, v, op)

    def lhs_scalar_block_copy(self, lhs, rhs):
        # a[k] = v[k] with identical simple index names: plain copy (same result as fill anyway)
        return lhs[0] == 'blk' and [r for c, r in lhs[2]] == [r for c, r in rhs[2]]

    def apply(self, dst, val, op):
        if op == '=': dst[...] = val
        elif op == '+=': dst[...] += val
        elif op == '-=': dst[...] -= val
        elif op == '*=': dst[...] *= val

    def execute(self, st):
        _, ln, name, args = st
        d = self.p.decls[name]
        name = bare(name)
        sig = d['sig']
        assert len(sig) == len(args), st
        res = []
        for a, s in zip(args, sig):
            if a[0] == 'dbl':
                res.append(np.array([a[1]]))
            else:
                arr, _ = self.resolve(a, 'r' if s == 'r' else ('w' if s == 'w' else 'u'))
                if isinstance(arr, ScalarBox):
                    arr = arr
                res.append(arr)
        for a, s in zip(res, sig):
            if s == 'w':
                a[...] = 0.0
        if name == 'fill_block_sequential' or name == 'fill_block_cyclic':
            dst, v = res
            v = float(np.asarray(v[...]).flat[0])
            vals = []
            c = v
            for _ in range(dst.size):
                vals.append(c); c += 1
                if name == 'fill_block_cyclic' and c > 20: c = 1
            dst[...] = np.array(vals).reshape(dst.shape, order='F')
        elif name == 'get_first_block_element':
            src, dst = res
            dst.set_first(float(np.asarray(src).flat[0])) if isinstance(dst, ScalarBox) else dst.__setitem__((0,) * dst.ndim, src.flat[0])
        elif name == 'swap_blocks':
            a, b = res
            ta = np.array(a[...]).copy(); a[...] = np.array(b[...]); b[...] = ta
        elif name == 'get_my_rank':
            res[0][...] = 0.0
        elif name in ('one_arg_no_op', 'enable_all_rank_print', 'disable_all_rank_print', 'print_block', 'print_static_array'):
            pass
        else:
            raise SialError('unknown special ' + name)

    def do_print(self, st):
        _, ln, e = st
        nl = '\n' if st[0] == 'println' else ''
        if e[0] == 'str':
            self.out.append(e[1] + '\n' + nl); return
        if e[0] == 'id':
            n = qual(e[1])
            if n in self.ints or (self.p.decls.get(n, {}).get('kind') in ('index', 'subindex')):
                self.out.append('%d:  %s = %d\n' % (ln, bare(n), self.eval(e)) + nl); return
            if n in self.scalars:
                self.out.append('%d:  %s = %.14f\n' % (ln, bare(n), self.scalars[n]) + nl); return
            if n in self.static:
                a = self.static[n]
                self.out.append('%d:  printing %d of %d elements of contiguous array %s in the order stored in memory \n' % (ln, a.size, a.size, bare(n)) + '<elements>\n' + nl); return
        if e[0] == 'blk':
            b, _ = self.resolve(e, 'r')
            vals = ','.join(str(self.ival(r)) for c, r in e[2])
            if b.size == 1:
                self.out.append('%d:  %s[%s] = %.14f\n' % (ln, bare(e[1]), vals, b.flat[0]) + nl)
            else:
                self.out.append('%d:  printing %d of %d elements of block %s[%s] in the order stored in memory \n' % (ln, b.size, b.size, bare(e[1]), vals) + '<elements>\n' + nl)
            return
        if e[0] == 'cblk':
            b, _ = self.resolve(e, 'r')
            parts = []
            for lo, hi in e[2]:
                l, h = self.eval(lo), self.eval(hi)
                parts.append(str(l) if l == h else '%d:%d' % (l, h))
            self.out.append('%d:  printing %d of %d elements of block %s[%s] in the order stored in memory \n' % (ln, b.size, b.size, bare(e[1]), ','.join(parts)) + '<elements>\n' + nl)
            return
        v = self.eval(e)
        if isinstance(v, int):
            self.out.append('%d' % v + nl)
        else:
            self.out.append('%.14f\n' % v + nl)

    def end_program(self):
        for n, lab in self.persist_marks:
            if n in self.scalars:
                self.saved[lab] = ('scalar', self.scalars[n])
            elif n in self.static:
                self.saved[lab] = ('static', self.static[n].copy())
            else:
                self.saved[lab] = ('dist', {k: v.copy() for k, v in self.dist.get(n, {}).items()})

class ScalarBox:
    """1-element block aliasing a scalar"""
    def __init__(self, m, n):
        self.m = m; self.n = n
        self.shape = (1,); self.size = 1; self.ndim = 1
    def __getitem__(self, k):
        return np.array([self.m.scalars[self.n]])
    def __setitem__(self, k, v):
        self.m.scalars[self.n] = float(np.asarray(v).flat[0])
    def set_first(self, v):
        self.m.scalars[self.n] = v
    @property
    def flat(self):
        return np.array([self.m.scalars[self.n]]).flat
    def __array__(self, dtype=None, copy=None):
        return np.array([self.m.scalars[self.n]])

def run_program(path, setup, saved, base):
    prog = Prog()
    parse_file(path, prog, {})
    out = []
    m = Machine(prog, setup, saved, out, base)
    m.dist = {}
    m.scopes = [[]]
    err = None
    try:
        m.run(prog.body)
        m.end_program()
    except Stop:
        err = 'sial stop command caused program abort'
    return m, ''.join(out), err

def check(path):
    base = os.path.dirname(os.path.abspath(path))
    tom = os.path.splitext(path)[0] + '.toml'
    setup = {}
    if os.path.exists(tom):
        setup = tomllib.load(open(tom, 'rb'))
    src = open(path).read().split('\n')
    exp = [l[len('# expect:'):].strip() for l in src if l.startswith('# expect:')]
    expp = [l[len('# expect-print:'):].lstrip(' ') if l.startswith('# expect-print: ') else '' for l in src if l.startswith('# expect-print:')]
    expc = [l[len('# expect-print-contains:'):].strip() for l in src if l.startswith('# expect-print-contains:')]
    return setup, exp, expp, expc

def verify(path, m, out, err, exp, expp, expc):
    ok = True
    experr = [l[len('# expect-error:'):].strip() for l in open(path).read().split('\n') if l.startswith('# expect-error:')]
    if experr != ([err] if err else []):
        ok = False
        print('  ERROR-EXPECTATION MISMATCH %s: got %r expected %r' % (path, err, experr), file=sys.stderr)
    for e in exp:
        n, v = [x.strip() for x in e.split('=')]
        n = m.p.name + '.' + n if (m.p.name + '.' + n) in m.ints or (m.p.name + '.' + n) in m.scalars else \
            [k for k in list(m.ints) + list(m.scalars) if bare(k) == n][0]
        if n in m.ints:
            got = m.ints[n]
            good = got == int(v)
        else:
            got = m.scalars[n]
            good = abs(got - float(v)) <= 1e-9 * max(1.0, abs(float(v)))
        if not good:
            ok = False
            print('  MISMATCH %s: %s expected %s' % (path, n, v), file=sys.stderr)
    if expp:
        lines = out.split('\n')
        if lines and lines[-1] == '':
            lines = lines[:-1]
        if lines != expp:
            ok = False
            print('  PRINT MISMATCH %s:\n got %r\n exp %r' % (path, lines, expp), file=sys.stderr)
    for c in expc:
        if c not in out:
            ok = False
            print('  PRINT-CONTAINS MISSING %s: %r' % (path, c), file=sys.stderr)
    return ok

def main(paths):
    allok = True
    for path in paths:
        if path.endswith('.toml'):
            job = tomllib.load(open(path, 'rb'))
            saved = {}
            base = os.path.dirname(os.path.abspath(path))
            for pr in job['programs']:
                pp = os.path.join(base, pr)
                _, exp, expp, expc = check(pp)
                try:
                    m, out, err = run_program(pp, job, saved, base)
                    ok = verify(pp, m, out, err, exp, expp, expc)
                except Exception as ex:
                    import traceback; traceback.print_exc()
                    ok = False
                    print('  ERROR %s line %s: %s' % (pp, getattr(m, 'line', '?') if False else '?', ex), file=sys.stderr)
                print(('ok   ' if ok else 'FAIL ') + pp)
                allok &= ok
            continue
        if any(l.startswith('# job:') for l in open(path).read().split('\n')):
            print('skip ' + path + ' (runs only as part of its job file)')
            continue
        setup, exp, expp, expc = check(path)
        try:
            m, out, err = run_program(path, setup, {}, os.path.dirname(os.path.abspath(path)))
            ok = verify(path, m, out, err, exp, expp, expc)
        except Exception as ex:
            ok = False
            print('  ERROR %s: %r' % (path, ex), file=sys.stderr)
        print(('ok   ' if ok else 'FAIL ') + path)
        allok &= ok
    return allok

if __name__ == '__main__':
    sys.exit(0 if main(sys.argv[1:]) else 1)
