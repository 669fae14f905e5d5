import gzip,sys,cupy as C
R=C.cuda.runtime;D=C.cuda.Device()
def rd(p):
 E=[];F=set()
 for l in gzip.open(p,'rt'):
  if l[0]=='#' or l[:4]=='seq,' or not l.strip():continue
  x=l.split(',');o=x[2]
  if o=='free_done':F.add(int(x[6]))
  E.append((o,int(x[5]),int(x[6]),int(x[7])))
 return E,F
def fr(o,i,F):return(o=='free'and i not in F)or o=='free_done'
def cp(E,F):
 n=[0]
 def a(s):n[0]+=1;return C.cuda.MemoryPointer(C.cuda.Memory(s),0)
 P=C.cuda.MemoryPool(a);S={};L={};t=u=0
 for o,s,i,z in E:
  if o=='alloc':
   st=C.cuda.Stream.null if s==0 else S.setdefault(s,C.cuda.Stream(non_blocking=True))
   with st:L[i]=P.malloc(z)
   t=max(t,P.total_bytes());u=max(u,P.used_bytes())
  elif o=='empty_cache':P.free_all_blocks()
  elif fr(o,i,F):L.pop(i,None)
 e=P.total_bytes();L.clear();P.free_all_blocks();D.synchronize();return t,u,n[0],e,''
def asy(E,F,th):
 p=R.deviceGetDefaultMemPool(D.id);D.synchronize();R.memPoolTrimTo(p,0)
 R.memPoolSetAttribute(p,4,th);R.memPoolSetAttribute(p,6,0);R.memPoolSetAttribute(p,8,0)
 S={};L={};G={};g=0;r=R.memPoolGetAttribute(p,5)
 for o,s,i,z in E:
  if o=='alloc':
   st=0 if s==0 else S.setdefault(s,C.cuda.Stream(non_blocking=True)).ptr
   L[i]=(R.mallocAsync(max(z,1),st),st);w=R.memPoolGetAttribute(p,5)
   if w>r:g+=1;G[w-r]=G.get(w-r,0)+1
   r=w
  elif o=='empty_cache':D.synchronize();R.memPoolTrimTo(p,0);r=R.memPoolGetAttribute(p,5)
  elif fr(o,i,F)and i in L:q,st=L.pop(i);R.freeAsync(q,st)
 x=(R.memPoolGetAttribute(p,6),R.memPoolGetAttribute(p,8),g,R.memPoolGetAttribute(p,5),' '.join('%d*%d'%(G[b],b)for b in sorted(G)))
 for q,st in L.values():R.freeAsync(q,st)
 D.synchronize();R.memPoolTrimTo(p,0);return x
print('trace,pool,events,allocs,peak_reserved,peak_used,device_allocs,reserved_end,steps')
for f in sys.argv[1:]:
 E,F=rd(f)
 for nm,fn in(('cupy',lambda:cp(E,F)),('async-max',lambda:asy(E,F,2**64-1)),('async-0',lambda:asy(E,F,0))):
  try:v=fn()
  except Exception as e:v=(-1,-1,-1,-1,'error: '+str(e).replace(',',';')[:150])
  print(','.join(map(str,(f.split('/')[-1],nm,len(E),sum(1 for e in E if e[0]=='alloc'))+v)),flush=True)
