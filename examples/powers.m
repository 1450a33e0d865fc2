% POWERS  Fourth and sixteenth power of a square matrix.
%   C = A^4, computed by repeated squaring (B = A*A, C = B*B), and
%   D = A^16, written with the power operator.
%   linview keeps C and D fresh while A changes by low-rank updates.

function [C, D] = powers(A)
  %#linview dims A(n,n)
  B = A * A;
  C = B * B;
  D = A^16;
end
