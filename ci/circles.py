#!/usr/bin/env python3
"""Fails if the modules of a crate import each other in a circle.

A module's imports are the `crate::…` and `super::…` paths in its file
(names re-exported from lib.rs count as their module's), outside
`#[cfg(test)]` modules. Usage: ci/circles.py SRC_DIR...
"""
import os
import re
import sys

def mods(src):
    out={}
    for root,_,fs in os.walk(src):
        for f in fs:
            if not f.endswith('.rs'): continue
            p=os.path.join(root,f); rel=os.path.relpath(p,src)[:-3]
            parts=rel.split('/')
            if parts[-1]=='mod': parts=parts[:-1]
            if parts==['lib']: continue
            out['::'.join(parts)]=p
    return out
def reexports(src,m):
    t=open(os.path.join(src,'lib.rs')).read()
    out={}
    for mm in re.finditer(r'pub use (\w+)::(\{[^;]*\}|\w+);',t):
        mod=mm.group(1); items=re.findall(r'\w+',mm.group(2))
        for it in items:
            if mod in m: out[it]=mod
    return out
def deps(src):
    m=mods(src); g={k:set() for k in m}
    rx=reexports(src,m)
    for k,p in m.items():
        t=open(p).read()
        # strip cfg(test) mod tests blocks roughly: cut at '#[cfg(test)]\nmod tests'
        mt=re.search(r'#\[cfg\((test|all\(test[^\]]*)\)\]\s*(pub(\(\w+\))? )?mod \w+',t)
        if mt: t=t[:mt.start()]
        t=re.sub(r'//.*','',t)
        for mm in re.finditer(r'crate::((?:\w+::)*\w+)',t):
            path=mm.group(1).split('::')
            if path[0] in rx and rx[path[0]]!=k: g[k].add(rx[path[0]]); continue
            for n in range(len(path),0,-1):
                c='::'.join(path[:n])
                if c in m and c!=k: g[k].add(c); break
        # use crate::{a, b::c}
        for mm in re.finditer(r'crate::\{([^;]*)\}',t,re.S):
            for item in re.findall(r'(\w+)(?:::|\s*[,}]|\s*$)',mm.group(1)):
                if item in m and item!=k: g[k].add(item)
                elif item in rx and rx[item]!=k: g[k].add(rx[item])
        parts=k.split('::')
        for mm in re.finditer(r'super::((?:\w+::)*\w+)',t):
            base=parts[:-1]; path=mm.group(1).split('::')
            for n in range(len(path),-1,-1):
                c='::'.join(base+path[:n])
                if c in m and c!=k: g[k].add(c); break
    return g
def sccs(g):
    idx={};low={};st=[];on=set();res=[];c=[0]
    sys.setrecursionlimit(10000)
    def sc(v):
        idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
        for w in g[v]:
            if w not in idx: sc(w);low[v]=min(low[v],low[w])
            elif w in on: low[v]=min(low[v],idx[w])
        if low[v]==idx[v]:
            comp=[]
            while True:
                w=st.pop();on.discard(w);comp.append(w)
                if w==v:break
            res.append(comp)
    for v in g:
        if v not in idx: sc(v)
    return [sorted(x) for x in res if len(x)>1]
bad = 0
for src in sys.argv[1:]:
    g = deps(src)
    for comp in sccs(g):
        bad += 1
        print(f"{src}: modules importing each other in a circle: {', '.join(comp)}")
        for a in comp:
            print(f"    {a} -> {', '.join(sorted(x for x in g[a] if x in comp))}")
sys.exit(1 if bad else 0)
