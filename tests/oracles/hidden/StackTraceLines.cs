// StackTraceLines.cs - the expected answers at hidden sequence points, from
// outside pdbsym (README.md in this folder says how they are used).
//
// Reads "kind<TAB>key<TAB>path" lines on standard input:
//   pdb       a Portable PDB file
//   embedded  a PE image with an embedded Portable PDB
//   winpdb    a .winpdb.jsonl file: the sequence points Microsoft's
//             DiaSymReader (ISymUnmanagedReader) returned for a Windows PDB
// and writes, for every probe whose covering sequence point is hidden, one
// line "key token il runtime contract note":
//   runtime   Portable PDBs: "line:column" that the .NET runtime's own stack
//             trace code gives for (token, IL offset) - the internal
//             System.Diagnostics.StackTraceSymbols.GetSourceLineInfo, called
//             through reflection - or "-" when it gives none; "." for winpdb.
//   contract  the point docs/contract.md's rule picks, as "IL#k" (the k-th point,
//             from 0, at IL offset IL in the method's point order), or "-":
//             the nearest visible point at a lower IL offset, else the nearest
//             at a higher offset, else none.  Where the runtime answered, it is
//             the point the runtime's answer names (checked to be the one the
//             rule picks; any other case stops this program).
//   note      runtime     the runtime's answer, a point at a lower offset
//             above       no visible point below: the runtime gives none, the
//                         contract the first visible point above
//             none        no visible point in the method
//             same-offset the runtime took a visible point at the covering
//                         hidden point's own offset; the contract asks for a
//                         lower offset (the contract's point is given)
//             below       (winpdb) the nearest visible point below
// Probes: for every IL offset P that starts a sequence point, P, and P+1 when
// no point starts there.  The covering point of an offset is the last point
// (in the method's order) at the highest offset at or below it.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Reflection.Metadata;
using System.Reflection.Metadata.Ecma335;
using System.Reflection.PortableExecutable;
using System.Runtime.InteropServices;
using System.Text.Json;

sealed class Point
{
    public int Il, Line, Col;
    public bool Hidden;
    public string Doc;
}

// The runtime's GetSourceLineInfo over one file's bytes.
sealed class Runtime : IDisposable
{
    static readonly Type StsType =
        Type.GetType("System.Diagnostics.StackTraceSymbols, System.Diagnostics.StackTrace", true);
    static readonly MethodInfo Get = StsType.GetMethod("GetSourceLineInfo",
        BindingFlags.Instance | BindingFlags.NonPublic | BindingFlags.Public);

    readonly object sts = Activator.CreateInstance(StsType, true);
    readonly GCHandle pin;
    readonly string assemblyPath;
    readonly bool embedded;
    readonly int size;

    public Runtime(byte[] bytes, string path, bool embeddedInPe)
    {
        pin = GCHandle.Alloc(bytes, GCHandleType.Pinned);
        size = bytes.Length;
        embedded = embeddedInPe;
        assemblyPath = path;
    }

    // (line, column, file) or null
    public Tuple<int, int, string> Answer(int token, int il)
    {
        IntPtr p = pin.AddrOfPinnedObject();
        // a PE with its embedded PDB: the assembly's path and loaded image; a
        // Portable PDB: the in-memory PDB (as for dynamic modules)
        IntPtr pe = embedded ? p : IntPtr.Zero, pdb = embedded ? IntPtr.Zero : p;
        string path = embedded ? assemblyPath : null;
        int peSize = embedded ? size : 0, pdbSize = embedded ? 0 : size;
        ParameterInfo[] ps = Get.GetParameters();
        object[] a = ps.Length == 12
            ? new object[] { typeof(Runtime).Assembly, path, pe, peSize, true, pdb, pdbSize, token, il, null, 0, 0 }
            : new object[] { typeof(Runtime).Assembly, path, pe, peSize, pdb, pdbSize, token, il, null, 0, 0 };
        Get.Invoke(sts, a);
        int n = a.Length;
        int line = (int)a[n - 2], col = (int)a[n - 1];
        string file = (string)a[n - 3];
        return line == 0 || file == null ? null : Tuple.Create(line, col, file);
    }

    public void Dispose()
    {
        ((IDisposable)sts).Dispose();
        pin.Free();
    }
}

static class Program
{
    static int mismatches;

    static SortedDictionary<int, List<Point>> FromReader(MetadataReader r)
    {
        var methods = new SortedDictionary<int, List<Point>>();
        foreach (MethodDebugInformationHandle h in r.MethodDebugInformation)
        {
            MethodDebugInformation mdi = r.GetMethodDebugInformation(h);
            if (mdi.SequencePointsBlob.IsNil)
                continue;
            var pts = new List<Point>();
            foreach (SequencePoint sp in mdi.GetSequencePoints())
                pts.Add(new Point
                {
                    Il = sp.Offset,
                    Line = sp.StartLine,
                    Col = sp.StartColumn,
                    Hidden = sp.IsHidden,
                    Doc = sp.Document.IsNil ? "" : r.GetString(r.GetDocument(sp.Document).Name),
                });
            if (pts.Count > 0)
                methods[MetadataTokens.GetToken(h.ToDefinitionHandle())] = pts;
        }
        return methods;
    }

    static SortedDictionary<int, List<Point>> FromWinPdb(string path)
    {
        var methods = new SortedDictionary<int, List<Point>>();
        foreach (string line in File.ReadLines(path))
        {
            using JsonDocument d = JsonDocument.Parse(line);
            JsonElement e = d.RootElement;
            if (e.GetProperty("kind").GetString() != "sp")
                continue;
            JsonElement t = e.GetProperty("token");
            int token = t.ValueKind == JsonValueKind.String
                ? int.Parse(t.GetString().Substring(2), NumberStyles.HexNumber)
                : t.GetInt32();
            if (!methods.TryGetValue(token, out List<Point> pts))
                methods[token] = pts = new List<Point>();
            pts.Add(new Point
            {
                Il = e.GetProperty("il").GetInt32(),
                Line = e.GetProperty("sl").GetInt32(),
                Col = e.GetProperty("sc").GetInt32(),
                Hidden = e.GetProperty("hidden").GetBoolean(),
                Doc = e.GetProperty("doc").GetString(),
            });
        }
        return methods;
    }

    static string Ref(List<Point> pts, Point p)
    {
        if (p == null)
            return "-";
        int k = 0;
        foreach (Point q in pts)
        {
            if (q == p)
                break;
            if (q.Il == p.Il)
                k++;
        }
        return p.Il + "#" + k;
    }

    static void Emit(TextWriter w, string key, SortedDictionary<int, List<Point>> methods, Runtime rt)
    {
        foreach (KeyValuePair<int, List<Point>> m in methods)
        {
            List<Point> pts = m.Value;
            var starts = new SortedSet<int>(pts.Select(p => p.Il));
            var probes = new SortedSet<int>();
            foreach (int s in starts)
            {
                probes.Add(s);
                if (!starts.Contains(s + 1))
                    probes.Add(s + 1);
            }
            foreach (int il in probes)
            {
                int top = pts.Where(p => p.Il <= il).Select(p => p.Il).DefaultIfEmpty(-1).Max();
                if (top < 0)
                    continue;
                Point cover = pts.Last(p => p.Il == top);
                if (!cover.Hidden)
                    continue;
                // the contract's rule, on the points themselves
                int below = pts.Where(p => !p.Hidden && p.Il < top).Select(p => p.Il).DefaultIfEmpty(-1).Max();
                Point want = below >= 0 ? pts.Last(p => !p.Hidden && p.Il == below)
                                        : pts.FirstOrDefault(p => !p.Hidden && p.Il > top);
                string note = want == null ? "none" : below >= 0 ? "below" : "above";
                string said = ".";
                if (rt != null)
                {
                    Tuple<int, int, string> a = rt.Answer(m.Key, il);
                    said = a == null ? "-" : a.Item1 + ":" + a.Item2;
                    // the point the runtime's answer names: a visible point at
                    // or below the offset with its line, column and document
                    Point named = a == null ? null : pts.LastOrDefault(p => !p.Hidden && p.Il <= il &&
                        p.Line == a.Item1 && p.Col == a.Item2 && p.Doc == a.Item3);
                    bool expected_none = a == null && note != "below"; // nothing visible below
                    if (named != null && named.Il < top && note == "below" && named == want)
                        note = "runtime";
                    else if (named != null && named.Il == top)
                        note = "same-offset";
                    else if (!expected_none)
                    {
                        mismatches++;
                        Console.Error.WriteLine("{0} 0x{1:X8}+{2}: runtime {3}, contract {4} ({5})",
                            key, m.Key, il, said, Ref(pts, want), note);
                        note = "MISMATCH";
                    }
                }
                w.WriteLine("{0}\t0x{1:X8}\t{2}\t{3}\t{4}\t{5}", key, m.Key, il, said, Ref(pts, want), note);
            }
        }
    }

    static int Main()
    {
        TextWriter w = Console.Out;
        w.WriteLine("# key\ttoken\til\truntime\tcontract\tnote");
        w.WriteLine("# made by tests/oracles/hidden/make.sh (StackTraceLines.cs, {0}); see README.md",
            RuntimeInformation.FrameworkDescription);
        string line;
        while ((line = Console.In.ReadLine()) != null)
        {
            string[] f = line.Split('\t');
            if (f.Length != 3)
                continue;
            string kind = f[0], key = f[1], path = f[2];
            if (kind == "winpdb")
            {
                Emit(w, key, FromWinPdb(path), null);
                continue;
            }
            byte[] bytes = File.ReadAllBytes(path);
            if (kind == "pdb")
            {
                using var prov = MetadataReaderProvider.FromPortablePdbImage(
                    System.Collections.Immutable.ImmutableArray.Create(bytes));
                using var rt = new Runtime(bytes, path, false);
                Emit(w, key, FromReader(prov.GetMetadataReader()), rt);
            }
            else if (kind == "embedded")
            {
                using var pe = new PEReader(new MemoryStream(bytes));
                DebugDirectoryEntry e = pe.ReadDebugDirectory()
                    .First(x => x.Type == DebugDirectoryEntryType.EmbeddedPortablePdb);
                using MetadataReaderProvider prov = pe.ReadEmbeddedPortablePdbDebugDirectoryData(e);
                using var rt = new Runtime(bytes, Path.GetFullPath(path), true);
                Emit(w, key, FromReader(prov.GetMetadataReader()), rt);
            }
        }
        w.Flush();
        if (mismatches > 0)
            Console.Error.WriteLine("{0} answers neither the runtime's rule nor the contract's explain", mismatches);
        return mismatches > 0 ? 1 : 0;
    }
}
