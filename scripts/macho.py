"""Mach-O objects and archives, as scripts/xcframework needs them, in plain
Python (no Apple tool: Mach-O has no `ld -r` here, and llvm-objcopy refuses
to localize symbols in Mach-O). A module that scripts/xcframework imports;
run on its own (`python3 scripts/macho.py`), it lists an archive's members
or an object's sections.

- `read_archive` / the members of an `ar` archive (GNU or BSD names);
- `localize`: a 64-bit MH_OBJECT whose only external definitions are the
  names given, every other definition made local (N_EXT and N_PEXT cleared,
  weak flags dropped) or, for names asked for that nothing refers to,
  removed from the symbol table; the symbol table reordered as Mach-O requires
  (locals, then external definitions, then undefined names, each of the last
  two sorted by name) and every symbol index that points into it (external
  relocations, the indirect symbol table) renumbered;
- `sections` / `section_bytes`: a section's contents, for the layout probe.
"""
import struct
import sys

MH_MAGIC_64 = 0xFEEDFACF
MH_OBJECT = 0x1
LC_SEGMENT_64 = 0x19
LC_SYMTAB = 0x2
LC_DYSYMTAB = 0xB
LC_DATA_IN_CODE = 0x29
LC_LINKER_OPTIMIZATION_HINT = 0x2E
N_STAB = 0xE0
N_PEXT = 0x10
N_TYPE = 0x0E
N_EXT = 0x01
N_UNDF = 0x0
N_WEAK_REF = 0x0040
N_WEAK_DEF = 0x0080
R_SCATTERED = 0x80000000
INDIRECT_SYMBOL_LOCAL = 0x80000000
INDIRECT_SYMBOL_ABS = 0x40000000


class MachOError(Exception):
    pass


def read_archive(data):
    """[(name, bytes)] of an ar archive's members, symbol tables left out."""
    if not data.startswith(b"!<arch>\n"):
        raise MachOError("not an ar archive")
    at, gnu_names, out = 8, b"", []
    while at + 60 <= len(data):
        head = data[at:at + 60]
        name = head[:16].decode("ascii").rstrip()
        size = int(head[48:58].decode("ascii").strip())
        body = data[at + 60:at + 60 + size]
        at += 60 + size + (size & 1)
        if name.startswith("#1/"):  # BSD: the name leads the body
            n = int(name[3:])
            name, body = body[:n].rstrip(b"\0").decode(), body[n:]
        elif name == "//":  # GNU long-name table
            gnu_names = body
            continue
        elif name.startswith("/") and name[1:].isdigit():
            off = int(name[1:])
            name = gnu_names[off:gnu_names.index(b"/\n", off)].decode()
        else:
            name = name[:-1] if name.endswith("/") else name
        if name in ("", "/", "/SYM64/") or name.startswith("__.SYMDEF"):
            continue
        out.append((name, body))
    return out


def _header(data):
    if len(data) < 32:
        raise MachOError("too short for a Mach-O header")
    magic, cputype, _sub, filetype, ncmds, _sizeofcmds, _flags, _res = struct.unpack_from("<IiiIIIII", data, 0)
    if magic != MH_MAGIC_64:
        raise MachOError(f"not a 64-bit little-endian Mach-O file (magic {magic:#x})")
    return cputype, filetype, ncmds


def load_commands(data):
    """[(cmd, offset, cmdsize)]."""
    _cpu, _ft, ncmds = _header(data)
    at, out = 32, []
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        out.append((cmd, at, size))
        at += size
    return out


def sections(data):
    """[(segname, sectname, offset, size, reloff, nreloc)] of every section."""
    out = []
    for cmd, at, _size in load_commands(data):
        if cmd != LC_SEGMENT_64:
            continue
        nsects = struct.unpack_from("<I", data, at + 64)[0]
        for i in range(nsects):
            s = at + 72 + 80 * i
            sect = data[s:s + 16].rstrip(b"\0").decode()
            seg = data[s + 16:s + 32].rstrip(b"\0").decode()
            _addr, size, offset, _align, reloff, nreloc = struct.unpack_from("<QQIIII", data, s + 32)
            out.append((seg, sect, offset, size, reloff, nreloc))
    return out


def section_bytes(data, segname, sectname):
    for seg, sect, offset, size, _r, _n in sections(data):
        if (seg, sect) == (segname, sectname):
            return data[offset:offset + size]
    raise MachOError(f"no section {segname},{sectname}")


def _strtab_name(data, stroff, strx):
    end = data.index(b"\0", stroff + strx)
    return data[stroff + strx:end].decode()


def localize(data, keep, drop=()):
    """A copy of MH_OBJECT `data` whose external definitions are only the
    names in `keep` (Mach-O names, with their leading underscore); the names
    in `drop` that nothing in the object refers to (no relocation, no
    indirect symbol) are removed from the symbol table altogether (their
    bytes stay, as dead code). Returns (new bytes, [names made local],
    [names removed])."""
    _cpu, filetype, _n = _header(data)
    if filetype != MH_OBJECT:
        raise MachOError("not a relocatable object (MH_OBJECT)")
    cmds = load_commands(data)
    symtab = next((at for c, at, _s in cmds if c == LC_SYMTAB), None)
    dysymtab = next((at for c, at, _s in cmds if c == LC_DYSYMTAB), None)
    if symtab is None or dysymtab is None:
        raise MachOError("no LC_SYMTAB or LC_DYSYMTAB")
    symoff, nsyms, stroff, _strsize = struct.unpack_from("<IIII", data, symtab + 8)
    dy = list(struct.unpack_from("<18I", data, dysymtab + 8))
    (ilocal, nlocal, iextdef, nextdef, iundef, nundef, _tocoff, ntoc, _modtaboff, nmodtab, _extrefsymoff, nextrefsyms,
     indirectsymoff, nindirectsyms, extreloff, nextrel, locreloff, nlocrel) = dy
    if ntoc or nmodtab or nextrefsyms:
        raise MachOError("an object with a table of contents, module table or external references (a dylib?)")
    if (ilocal, iextdef, iundef) != (0, nlocal, nlocal + nextdef) or nlocal + nextdef + nundef != nsyms:
        raise MachOError("LC_DYSYMTAB's symbol ranges do not partition the symbol table")

    syms = [list(struct.unpack_from("<IBBHQ", data, symoff + 16 * i)) for i in range(nsyms)]
    names = [_strtab_name(data, stroff, s[0]) for s in syms]
    locals_, newly, extdefs, undefs = [], [], [], []
    for i, (_strx, n_type, _sect, _desc, _value) in enumerate(syms):
        if n_type & N_STAB or not n_type & N_EXT:
            locals_.append(i)
        elif n_type & N_TYPE == N_UNDF:
            undefs.append(i)
        elif names[i] in keep:
            extdefs.append(i)
        else:
            newly.append(i)
    for i in newly:
        syms[i][1] &= ~(N_EXT | N_PEXT) & 0xFF
        syms[i][3] &= ~(N_WEAK_DEF | N_WEAK_REF) & 0xFFFF
    extdefs.sort(key=lambda i: names[i])
    undefs.sort(key=lambda i: names[i])

    # symbols that relocations and the indirect symbol table refer to
    referenced = set()
    reloc_tables = [(reloff, nreloc) for *_x, reloff, nreloc in sections(data)] + [(extreloff, nextrel), (locreloff, nlocrel)]
    for off, count in reloc_tables:
        for r in range(count):
            address, info = struct.unpack_from("<iI", data, off + 8 * r)
            if address & R_SCATTERED:
                raise MachOError("scattered relocation (not used on arm64 or x86_64)")
            if info >> 27 & 1:
                referenced.add(info & 0xFFFFFF)
    for k in range(nindirectsyms):
        v = struct.unpack_from("<I", data, indirectsymoff + 4 * k)[0]
        if not v & (INDIRECT_SYMBOL_LOCAL | INDIRECT_SYMBOL_ABS):
            referenced.add(v)
    # removing shortens the symbol table: only where the string table
    # follows it directly and ends the file (as LLVM writes objects)
    linkedit = [off for off, count in reloc_tables if count] + ([indirectsymoff] if nindirectsyms else []) + \
        [struct.unpack_from("<I", data, at + 8)[0] for c, at, _s in cmds if c in (LC_DATA_IN_CODE, LC_LINKER_OPTIMIZATION_HINT)]
    can_shrink = stroff == symoff + 16 * nsyms and stroff + _strsize == len(data) and all(off < symoff for off in linkedit)
    dropped = [i for i in newly if names[i] in drop and i not in referenced] if can_shrink else []
    newly = [i for i in newly if i not in dropped]
    order = locals_ + newly + extdefs + undefs
    new_index = {old: new for new, old in enumerate(order)}

    out = bytearray(data[:symoff + 16 * len(order)] + data[stroff:])
    for new, old in enumerate(order):
        struct.pack_into("<IBBHQ", out, symoff + 16 * new, *syms[old])
    struct.pack_into("<II", out, symtab + 12, len(order), symoff + 16 * len(order))

    def renumber_relocs(off, count):
        for r in range(count):
            at = off + 8 * r
            address, info = struct.unpack_from("<iI", out, at)
            if info >> 27 & 1:  # r_extern: r_symbolnum is a symbol index
                sym = info & 0xFFFFFF
                if sym not in new_index:
                    raise MachOError(f"relocation to symbol {sym} of {nsyms}")
                struct.pack_into("<I", out, at + 4, (info & ~0xFFFFFF) | new_index[sym])

    for off, count in reloc_tables:
        renumber_relocs(off, count)
    for k in range(nindirectsyms):
        at = indirectsymoff + 4 * k
        v = struct.unpack_from("<I", out, at)[0]
        if not v & (INDIRECT_SYMBOL_LOCAL | INDIRECT_SYMBOL_ABS):
            struct.pack_into("<I", out, at, new_index[v])

    dy[0:6] = [0, len(locals_) + len(newly), len(locals_) + len(newly), len(extdefs), len(locals_) + len(newly) + len(extdefs), len(undefs)]
    struct.pack_into("<18I", out, dysymtab + 8, *dy)
    return bytes(out), sorted(names[i] for i in newly), sorted(names[i] for i in dropped)


USAGE = """usage: python3 scripts/macho.py members ARCHIVE.a
       python3 scripts/macho.py sections FILE   (a 64-bit Mach-O object, or an archive of them)"""


def main(argv):
    """The command line: what an archive holds, or an object's sections."""
    if argv[:1] in (["-h"], ["--help"]):
        print(f"""{USAGE}

{__doc__.strip()}

Commands:
  members      the archive's members and their sizes in bytes
  sections     every section of each object: segment,section, file offset,
               size and relocation count
  -h, --help   this text
Exit status: 0 done, 1 a file that is not what it should be, 2 a bad
command line.""")
        return 0
    if len(argv) != 2 or argv[0] not in ("members", "sections"):
        bad = next((a for a in argv if a.startswith("-")), None)
        print(f"macho.py: {f'unknown option {bad!r}' if bad else 'a command and one file are required'}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2
    cmd, path = argv
    try:
        with open(path, "rb") as f:
            data = f.read()
        if cmd == "members":
            for name, body in read_archive(data):
                print(f"{len(body):10}  {name}")
            return 0
        objects = read_archive(data) if data.startswith(b"!<arch>\n") else [(path, data)]
        for name, body in objects:
            found = sections(body)
            print(f"{name}:")
            for seg, sect, offset, size, _reloff, nreloc in found:
                print(f"  {seg},{sect}  offset {offset}  size {size}  relocations {nreloc}")
        return 0
    except (OSError, MachOError, struct.error, ValueError) as e:
        print(f"macho.py: {path}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
