import gzip,sys,json,os,time
import jax,jax.numpy as J
def rd(p):
 E=[];F=set()
 for l in gzip.open(p,'rt'):
  if l[0]=='#' or l[:4]=='seq,' or not l.strip():continue
  x=l.split(',');o=x[2]
  if o=='free_done':F.add(int(x[6]))
  E.append((o,int(x[6]),int(x[7])))
 return E,F
C={}
def mk(z):
 f=C.get(z)
 if f is None:f=C[z]=jax.jit(lambda:J.zeros((z,),J.uint8))
 return f()
p=sys.argv[1];E,F=rd(p);L={};t=time.time();ok=1
try:
 for o,i,z in E:
  if o=='alloc':L[i]=mk(max(z,1))
  elif (o=='free' and i not in F) or o=='free_done':
   a=L.pop(i,None)
   if a is not None:a.block_until_ready();a.delete()
except Exception as e:ok=str(e)[:200]
s=jax.devices()[0].memory_stats()
print(json.dumps(dict(trace=os.path.basename(p),pre=os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'],ok=ok,sec=round(time.time()-t,1),**s)))
